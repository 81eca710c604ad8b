"""Pipeline stages, one module each (prepare, claim, fetch, plan, quantize, compile, smoke,
publish): the stage's functions of typed inputs returning typed results, its adapter (`run`: what
it reads from the `BuildState`, what it writes back) and its declaration (`STAGE`), which
`neuronforge.pipeline.runner.STAGES` lists in order. They never read Airflow context; the operators
in `neuronforge_airflow/` translate between the two. Helpers: `resolve` (pinning a source),
`payload` (assembling the artifact), `quantize_request` / `quantize_tensors` (quantize's request and
its torch work, imported only when a stage quantizes)."""
