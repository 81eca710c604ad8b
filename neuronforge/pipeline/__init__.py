"""The build: each stage, the state handed between them, the planner, the runner."""
