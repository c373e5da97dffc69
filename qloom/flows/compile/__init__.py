"""The compiler: its steps (load, plan, fold, emit), the planner, the engines each layer maps onto, and the searches over foldings and precisions."""
