// The Verilator main of a stream-harness run (see qloom/sim/harness_files.py): cocotb's own
// main (cocotb/share/lib/verilator/verilator.cpp, cocotb 2.1, Revised BSD License, cocotb
// contributors), with the harness's clock made here and a free-running loop.
//
// Why: under cocotb's main a clock made in the HDL (Verilator --timing) costs two cocotb time
// steps per cycle, each running Verilator's timing scheduler and every VPI callback list
// several times; for TFC-w1a1 that was a third of a run, more than the harness. Here:
//
// - The harness's `clock` is a top-level input toggled by this loop every half period
//   (plusarg +qloom_half_period=N, in time precision units; the first edge, a rising one, at
//   N). No --timing: Verilator evaluates the design on the edge alone.
// - Every time step is cocotb's (the same callbacks in the same order as its main), except
//   while the harness's `free_run` input is 1: the bench (qloom/sim/tb_harness.py) sets it
//   when it waits only for a change of the harness's `in_half`, `out_half` or `done`
//   outputs or for a timer. The loop then runs clock edges without calling into cocotb
//   until one of those outputs changes or the next timed callback is due, and then runs
//   that edge's time step as cocotb's main would (so the change is seen by the value-change
//   callbacks). Nothing else can happen meanwhile: cocotb acts only from callbacks.
//   With read-write or read-only callbacks pending the loop does not free-run.
//
// Tracing (--trace, a build with VM_TRACE) dumps every edge, free-running or not.

#include <libgen.h>  // basename
#include <stdio.h>   // stderr, fprintf

#include <algorithm>  // std::min
#include <cstdlib>    // strtoull
#include <memory>     // std::unique_ptr
#include <string>     // std::string

#include "Vtop.h"
#include "verilated.h"
#include "verilated_vpi.h"

#ifndef VM_TRACE_FST
#define VM_TRACE_FST 0
#endif

#if VM_TRACE
#if VM_TRACE_FST
#include <verilated_fst_c.h>
using verilated_trace_t = VerilatedFstC;
#else
#include <verilated_vcd_c.h>
using verilated_trace_t = VerilatedVcdC;
#endif
static verilated_trace_t *tfp;
#endif

static vluint64_t main_time = 0;  // current simulation time

double sc_time_stamp() {  // called by $time in Verilog
    return main_time;
}

extern "C" {
void vlog_startup_routines_bootstrap(void);
}

static inline bool settle_value_callbacks() {
    // Value-change callbacks can change values: call them until nothing changes.
    bool cbs_called, again;
    cbs_called = again = VerilatedVpi::callValueCbs();
    while (again) {
        again = VerilatedVpi::callValueCbs();
    }
    return cbs_called;
}

static void wrap_up() {
    VerilatedVpi::callCbs(cbEndOfSimulation);
#if VM_TRACE
    if (tfp) {
        tfp->close();
    }
#endif
}

static inline void dump() {
#if VM_TRACE
    if (tfp) {
        tfp->dump(main_time);
    }
#endif
}

// One time step at main_time, as in cocotb's main: evaluate until VPI writes settle, the
// read-write callbacks, then the read-only ones.
static void time_step(Vtop *top) {
    do {
        do {
            top->eval_step();
            VerilatedVpi::clearEvalNeeded();
            VerilatedVpi::doInertialPuts();
            settle_value_callbacks();
        } while (VerilatedVpi::evalNeeded());
        VerilatedVpi::callCbs(cbReadWriteSynch);
        VerilatedVpi::doInertialPuts();
        settle_value_callbacks();
    } while (VerilatedVpi::evalNeeded());
    top->eval_end_step();
    VerilatedVpi::callCbs(cbReadOnlySynch);
    dump();
}

// The bench waits only for a change of these (see the file's head).
static inline unsigned wake_state(const Vtop *top) {
    return (top->in_half ? 1u : 0u) | (top->out_half ? 2u : 0u) | (top->done ? 4u : 0u);
}

int main(int argc, char **argv) {
    Verilated::commandArgs(argc, argv);
    const char *half_arg = Verilated::commandArgsPlusMatch("qloom_half_period=");
    const std::string half_text = half_arg ? std::string(half_arg) : std::string();
    const std::string::size_type eq = half_text.find('=');
    const vluint64_t half = eq == std::string::npos
                                ? 0
                                : strtoull(half_text.c_str() + eq + 1, nullptr, 10);
    if (half == 0) {
        fprintf(stderr, "%s: needs +qloom_half_period=N (N > 0, the clock's half period in "
                        "time precision units)\n", basename(argv[0]));
        return 2;
    }

    std::unique_ptr<Vtop> top(new Vtop(""));
    Verilated::fatalOnVpiError(false);  // otherwise it fails on systemtf

#if VM_TRACE
    for (int i = 1; i < argc; i++) {
        if (std::string(argv[i]) == "--trace") {
            Verilated::traceEverOn(true);
            tfp = new verilated_trace_t;
            top->trace(tfp, 99);
            tfp->open(VM_TRACE_FST ? "dump.fst" : "dump.vcd");
        }
    }
#endif

    top->clock = 0;
    vluint64_t next_edge = half;
    vlog_startup_routines_bootstrap();
    Verilated::addExitCb([](void *) { wrap_up(); }, nullptr);
    VerilatedVpi::callCbs(cbStartOfSimulation);
    settle_value_callbacks();

    while (!Verilated::gotFinish()) {
        time_step(top.get());
        if (Verilated::gotFinish()) break;

        vluint64_t deadline = VerilatedVpi::cbNextDeadline();  // ~0: no timed callback
        if (top->free_run && !top->done && !VerilatedVpi::hasCbs(cbReadWriteSynch) &&
            !VerilatedVpi::hasCbs(cbReadOnlySynch)) {
            // Free run: edges without cocotb until a wake output changes or a timer is due.
            const unsigned wake = wake_state(top.get());
            bool woke = false;
            while (next_edge < deadline) {
                main_time = next_edge;
                next_edge += half;
                top->clock = !top->clock;
                top->eval();
                dump();
                if (wake_state(top.get()) != wake) {
                    woke = true;
                    break;
                }
            }
            if (woke) {
                // The edge is evaluated; its time step (the same eval is a no-op) lets the
                // value-change callbacks see the change.
                VerilatedVpi::callCbs(cbNextSimTime);
                settle_value_callbacks();
                VerilatedVpi::callTimedCbs();
                settle_value_callbacks();
                continue;
            }
        }

        // The next time step: the next clock edge or timed callback, whichever is first.
        const vluint64_t next_time = std::min(deadline, next_edge);
        main_time = next_time;
        if (next_time == next_edge) {
            next_edge += half;
            top->clock = !top->clock;
        }
        VerilatedVpi::callCbs(cbNextSimTime);
        settle_value_callbacks();
        VerilatedVpi::callTimedCbs();
        settle_value_callbacks();
    }

    top->final();
    wrap_up();
#if VM_TRACE
    if (tfp) {
        delete tfp;
        tfp = nullptr;
    }
#endif
    if (Verilated::threadContextp()->errorCount() > 0) {
        return 1;
    }
    return 0;
}
