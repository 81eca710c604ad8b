"""The DAGs' tasks and operators: one TaskFlow task per stage, the recompile and sweep tasks, pods."""
