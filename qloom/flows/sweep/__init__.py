"""Design-space sweeps: specs, points, the local or Ray runner, results and plots."""
