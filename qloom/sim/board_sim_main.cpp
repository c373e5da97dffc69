// The virtual board's main loop (see qloom/sim/board_sim.py): the Verilated board top
// (SimBoardTop: a power-on reset, UART, host link, accelerator; ports clk, uart_rx,
// uart_tx) behind a pseudo-terminal, with the clock toggled here, so that Python sets no
// pace.
//
// The far side of the UART is modelled like a USB-UART bridge: bytes a host writes to the
// pty go onto uart_rx back to back, 8N1, at the host's baud rate measured in simulated
// clock cycles (clock_hz / host_baud, not rounded: the board's own UART runs at clock /
// divisor, so the small rate mismatch of the real board is simulated too); uart_tx is
// sampled in the middle of each bit at the same rate and every byte with a good stop bit
// goes back to the pty. Nothing is dropped while a host is connected: bytes the pty cannot
// take yet (a host that stopped reading) wait in a queue here. While no host has the pty
// open (the kernel reports a hang-up), bytes from the board are dropped, as a closed serial
// port drops them, and counted.
//
// Simulated time stops while nothing is in flight, and the process sleeps until the host
// writes: an idle board costs no CPU. Nothing is in flight when both lines and the queue
// to the host have been quiet for idle_cycles (a frame's computation and then some) and
// no byte went to the board since the board began its last reply (so every request has
// been answered). Otherwise (a request stalled half-way, noise the board ignores) time
// stops only after stall_cycles, longer than the link's request timeout, so that a stalled
// request still gets its TIMEOUT reply as on the real board.
//
// Arguments are key=value: clock_hz, host_baud, idle_cycles, stall_cycles, reply_sync (the protocol's reply sync byte), status (a file rewritten with JSON counters
// a few times a second), max_replies (0: no limit; once reached, the program ends when
// the host closes the port, at the latest after linger_seconds, default 30), max_seconds
// (0: no limit). The first line on stdout is "pty <slave path>".
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "verilated.h"
#include "Vboard_top.h"

static volatile sig_atomic_t g_stop = 0;
static volatile sig_atomic_t g_signal = 0;

static void on_signal(int signum) {
    g_stop = 1;
    g_signal = signum;
}

static double now_seconds() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
    std::fprintf(stderr, "board_sim: %s: %s\n", what, std::strerror(errno));
    std::exit(2);
}

struct Counters {
    uint64_t cycles = 0;            // simulated clock cycles
    uint64_t bytes_to_board = 0;    // bytes driven onto uart_rx
    uint64_t bytes_from_board = 0;  // bytes decoded from uart_tx
    uint64_t bytes_to_host = 0;     // bytes the pty took
    uint64_t bytes_dropped = 0;     // bytes from the board while no host had the pty open
    uint64_t framing_errors = 0;    // uart_tx bytes whose stop bit was low
    uint64_t replies_ok = 0;
    uint64_t replies_error = 0;
    uint64_t max_queue = 0;         // most bytes waiting for a host that did not read
    uint64_t idle_pauses = 0;       // times simulated time stopped for an idle link
    double busy_seconds = 0.0;      // wall time spent simulating (pauses excluded)
    bool host_connected = false;
};

// Counts the board's replies in the byte stream back to the host: sync, status, length
// (2, little endian), payload, CRC (2), as qloom/hw/protocol.py specifies. Only counts:
// the host checks them.
struct ReplyCounter {
    int sync;
    int state = 0;                  // 0 hunt, 1 status, 2 len lo, 3 len hi, 4 rest
    int status = 0;
    uint32_t length = 0, left = 0;

    // Returns true for the sync byte that starts a reply.
    bool feed(uint8_t byte, Counters &c) {
        switch (state) {
        case 0:
            if (byte == sync) {
                state = 1;
                return true;
            }
            break;
        case 1: status = byte; state = 2; break;
        case 2: length = byte; state = 3; break;
        case 3:
            length |= uint32_t(byte) << 8;
            left = length + 2;
            state = 4;
            break;
        case 4:
            if (--left == 0) {
                (status == 0 ? c.replies_ok : c.replies_error)++;
                state = 0;
            }
            break;
        }
        return false;
    }
};

static void write_status(const std::string &path, const Counters &c, double clock_hz) {
    if (path.empty()) return;
    std::string tmp = path + ".tmp";
    FILE *f = std::fopen(tmp.c_str(), "w");
    if (!f) return;
    std::fprintf(f,
        "{\"cycles\": %llu, \"simulated_seconds\": %.9f, \"bytes_to_board\": %llu, "
        "\"bytes_from_board\": %llu, \"bytes_to_host\": %llu, \"bytes_dropped\": %llu, "
        "\"framing_errors\": %llu, \"replies_ok\": %llu, \"replies_error\": %llu, "
        "\"max_queue\": %llu, \"idle_pauses\": %llu, \"busy_seconds\": %.3f, "
        "\"host_connected\": %s}\n",
        (unsigned long long)c.cycles, c.cycles / clock_hz,
        (unsigned long long)c.bytes_to_board, (unsigned long long)c.bytes_from_board,
        (unsigned long long)c.bytes_to_host, (unsigned long long)c.bytes_dropped,
        (unsigned long long)c.framing_errors, (unsigned long long)c.replies_ok,
        (unsigned long long)c.replies_error, (unsigned long long)c.max_queue,
        (unsigned long long)c.idle_pauses, c.busy_seconds,
        c.host_connected ? "true" : "false");
    std::fclose(f);
    std::rename(tmp.c_str(), path.c_str());
}

int main(int argc, char **argv) {
    std::map<std::string, std::string> args;
    for (int k = 1; k < argc; k++) {
        const char *eq = std::strchr(argv[k], '=');
        if (!eq) {
            std::fprintf(stderr, "board_sim: argument %s is not key=value\n", argv[k]);
            return 2;
        }
        args[std::string(argv[k], eq - argv[k])] = eq + 1;
    }
    const char *required[] = {"clock_hz", "host_baud", "idle_cycles", "stall_cycles",
                              "reply_sync"};
    for (const char *key : required) {
        if (!args.count(key)) {
            std::fprintf(stderr, "board_sim: missing argument %s=\n", key);
            return 2;
        }
    }
    const uint64_t clock_hz = std::strtoull(args["clock_hz"].c_str(), nullptr, 10);
    const uint64_t host_baud = std::strtoull(args["host_baud"].c_str(), nullptr, 10);
    const uint64_t idle_cycles = std::strtoull(args["idle_cycles"].c_str(), nullptr, 10);
    const uint64_t stall_cycles = std::strtoull(args["stall_cycles"].c_str(), nullptr, 10);
    const uint64_t max_replies = args.count("max_replies")
        ? std::strtoull(args["max_replies"].c_str(), nullptr, 10) : 0;
    const double max_seconds = args.count("max_seconds")
        ? std::strtod(args["max_seconds"].c_str(), nullptr) : 0.0;
    const std::string status_path = args.count("status") ? args["status"] : "";
    const double linger_seconds = args.count("linger_seconds")
        ? std::strtod(args["linger_seconds"].c_str(), nullptr) : 30.0;
    if (clock_hz == 0 || host_baud == 0 || clock_hz < 4 * host_baud) {
        std::fprintf(stderr, "board_sim: clock_hz must be at least 4 x host_baud\n");
        return 2;
    }

    prctl(PR_SET_PDEATHSIG, SIGTERM);   // never outlive the qloom process that started us
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGHUP, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);

    // The pty: the master stays here; the slave is set to raw mode once and closed, so
    // that the kernel reports a hang-up until a host opens it.
    int master = posix_openpt(O_RDWR | O_NOCTTY | O_NONBLOCK);
    if (master < 0) die("posix_openpt");
    if (grantpt(master) != 0) die("grantpt");
    if (unlockpt(master) != 0) die("unlockpt");
    const char *slave_name = ptsname(master);
    if (!slave_name) die("ptsname");
    std::string slave_path(slave_name);
    int slave = open(slave_path.c_str(), O_RDWR | O_NOCTTY);
    if (slave < 0) die("open the pty's slave");
    termios tio;
    if (tcgetattr(slave, &tio) != 0) die("tcgetattr");
    cfmakeraw(&tio);
    if (tcsetattr(slave, TCSANOW, &tio) != 0) die("tcsetattr");
    close(slave);
    std::printf("pty %s\n", slave_path.c_str());
    std::fflush(stdout);

    VerilatedContext context;
    context.commandArgs(1, argv);
    Vboard_top top(&context);
    Counters c;
    ReplyCounter replies{int(std::strtol(args["reply_sync"].c_str(), nullptr, 10))};

    // uart_rx driver: bit n of the current byte (start, 8 data LSB first, stop) starts at
    // cycle rx_start + n * clock_hz / host_baud (integer arithmetic, no drift).
    std::deque<uint8_t> from_host;
    bool rx_busy = false;
    uint16_t rx_bits = 0;
    int rx_bit = 0;
    uint64_t rx_start = 0, rx_next = 0;
    // uart_tx sampler: the same timing, sampled mid-bit after a falling edge.
    bool tx_busy = false;
    int tx_bit = 0;
    uint16_t tx_shift = 0;
    uint64_t tx_start = 0, tx_next = 0;
    int tx_prev = 1;
    std::vector<uint8_t> to_host;
    size_t to_host_head = 0;

    auto bit_edge = [&](uint64_t start, uint64_t n) {
        return start + (n * clock_hz) / host_baud;
    };
    auto bit_middle = [&](uint64_t start, uint64_t n) {
        return start + ((2 * n + 1) * clock_hz) / (2 * host_baud);
    };

    // I/O with the pty every io_interval cycles: often enough that a byte waits at most a
    // bit time or so, rarely enough that system calls cost nothing next to the model.
    const uint64_t io_interval = 1024;
    uint64_t quiet = 0;                 // cycles since either line was busy
    uint64_t last_rx_cycle = 0;         // the last cycle a byte was on its way to the board
    uint64_t reply_start_cycle = 0;     // when the board began its latest reply
    bool sent_any = false;
    double started = now_seconds(), last_status = 0.0, busy_from = started;
    uint8_t buffer[4096];

    auto flush_to_host = [&]() {
        while (to_host_head < to_host.size()) {
            ssize_t n = write(master, to_host.data() + to_host_head,
                              to_host.size() - to_host_head);
            if (n > 0) {
                to_host_head += n;
                c.bytes_to_host += n;
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            break;                      // EAGAIN: the host is not reading; keep the bytes
        }
        if (to_host_head == to_host.size()) {
            to_host.clear();
            to_host_head = 0;
        }
    };

    auto pty_io = [&]() {
        pollfd p{master, POLLIN | POLLOUT, 0};
        poll(&p, 1, 0);
        if (p.revents & POLLIN) {       // bytes a host wrote before it hung up count too
            ssize_t n = read(master, buffer, sizeof buffer);
            for (ssize_t k = 0; k < n; k++) from_host.push_back(buffer[k]);
        }
        c.host_connected = !(p.revents & POLLHUP);
        if (!c.host_connected) {
            c.bytes_dropped += to_host.size() - to_host_head;
            to_host.clear();
            to_host_head = 0;
            return;
        }
        flush_to_host();
        uint64_t queued = to_host.size() - to_host_head;
        if (queued > c.max_queue) c.max_queue = queued;
    };

    auto tick = [&]() {
        top.clk = 0;
        top.eval();
        top.clk = 1;
        top.eval();
        c.cycles++;
    };

    top.uart_rx = 1;
    top.clk = 0;
    top.eval();                         // initial values; the design resets itself

    bool replies_done = false;          // max_replies answered and in the pty
    while (!g_stop && !replies_done) {
        const uint64_t cycle = c.cycles;
        // Host -> board.
        if (!rx_busy && !from_host.empty()) {
            rx_bits = uint16_t(from_host.front()) << 1 | 0x200;
            from_host.pop_front();
            rx_busy = true;
            rx_bit = 0;
            rx_start = cycle;
            rx_next = cycle;
        }
        if (rx_busy && cycle == rx_next) {
            if (rx_bit == 10) {
                rx_busy = false;        // the stop bit has ended
                c.bytes_to_board++;
                if (!from_host.empty()) continue;   // the next byte starts this cycle
            } else {
                top.uart_rx = (rx_bits >> rx_bit) & 1;
                rx_bit++;
                rx_next = bit_edge(rx_start, rx_bit);
            }
        }
        tick();
        // Board -> host.
        const int tx = top.uart_tx;
        if (!tx_busy) {
            if (tx_prev && !tx) {
                tx_busy = true;
                tx_bit = 0;
                tx_shift = 0;
                tx_start = c.cycles;
                tx_next = bit_middle(tx_start, 0);
            }
        } else if (c.cycles >= tx_next) {
            if (tx_bit == 0 && tx) {
                tx_busy = false;        // a glitch, not a start bit
            } else if (tx_bit >= 1 && tx_bit <= 8) {
                tx_shift |= uint16_t(tx) << (tx_bit - 1);
            } else if (tx_bit == 9) {
                tx_busy = false;
                c.bytes_from_board++;
                if (tx) {
                    to_host.push_back(uint8_t(tx_shift));
                    if (replies.feed(uint8_t(tx_shift), c)) reply_start_cycle = tx_start;
                } else {
                    c.framing_errors++;
                }
            }
            tx_bit++;
            tx_next = bit_middle(tx_start, tx_bit);
        }
        tx_prev = tx;

        if (rx_busy) {
            last_rx_cycle = c.cycles;
            sent_any = true;
        }
        const bool busy = rx_busy || tx_busy || !tx || !from_host.empty();
        quiet = busy ? 0 : quiet + 1;

        if (c.cycles % io_interval == 0) {
            pty_io();
            double t = now_seconds();
            if (t - last_status > 0.2) {
                c.busy_seconds += t - busy_from;
                busy_from = t;
                write_status(status_path, c, double(clock_hz));
                last_status = t;
            }
            if (max_seconds > 0 && t - started >= max_seconds) break;
            if (max_replies && c.replies_ok + c.replies_error >= max_replies
                    && to_host_head == to_host.size()) replies_done = true;
            if (replies_done) break;
            const bool answered = !sent_any || last_rx_cycle < reply_start_cycle;
            if (quiet >= (answered ? idle_cycles : stall_cycles) && from_host.empty()) {
                // Nothing in flight: stop simulated time until the host writes.
                c.idle_pauses++;
                c.busy_seconds += t - busy_from;
                write_status(status_path, c, double(clock_hz));
                while (!g_stop && !replies_done) {
                    const bool waiting = to_host_head < to_host.size();
                    pollfd p{master, short(POLLIN | (waiting ? POLLOUT : 0)), 0};
                    int ready = poll(&p, 1, 100);
                    double now = now_seconds();
                    if (max_seconds > 0 && now - started >= max_seconds) g_stop = 1;
                    c.host_connected = !(p.revents & POLLHUP);
                    if (!c.host_connected) {
                        c.bytes_dropped += to_host.size() - to_host_head;
                        to_host.clear();
                        to_host_head = 0;
                        usleep(50000);      // a hang-up polls at once: do not spin
                    } else if (ready > 0 && (p.revents & POLLOUT)) {
                        flush_to_host();
                    }
                    if (max_replies && c.replies_ok + c.replies_error >= max_replies
                            && to_host_head == to_host.size()) replies_done = true;
                    if (ready > 0 && (p.revents & POLLIN)) break;
                    if (now - last_status > 0.5) {
                        write_status(status_path, c, double(clock_hz));
                        last_status = now;
                    }
                }
                busy_from = now_seconds();
                quiet = 0;
            }
        }
    }
    // Deliver what the board already sent before stopping.
    if (c.host_connected) {
        double until = now_seconds() + 1.0;
        while (to_host_head < to_host.size() && now_seconds() < until) {
            flush_to_host();
            if (to_host_head < to_host.size()) usleep(10000);
        }
    }
    c.busy_seconds += now_seconds() - busy_from;
    write_status(status_path, c, double(clock_hz));
    // The last replies may still wait in the pty: closing the master now would hang the
    // host up before it read them (its reads fail with EIO). Wait until it closes the
    // port, or linger_seconds.
    if (replies_done) {
        const double until = now_seconds() + linger_seconds;
        while (!g_stop && now_seconds() < until) {
            pollfd p{master, 0, 0};
            poll(&p, 1, 0);
            if (p.revents & POLLHUP) break;
            usleep(50000);
        }
    }
    top.final();
    close(master);
    return g_signal ? 128 + g_signal : 0;
}
