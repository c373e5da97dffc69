"""A built design on its board: the deploy folder, the host link driver, and the simulated board behind a serial port."""
