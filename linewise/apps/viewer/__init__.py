"""The trace viewer: episode, run and bench folders as pages a browser opens from disk.

``build.write_viewer`` writes ``view/`` next to the traces: an index of the episodes and
one page per episode that shows a step at a time (screenshot with the acted-on element
boxed, the AXTree with what the filter kept, added and dropped, the LLM calls). Step
data is one small script file per step, loaded when the step is shown, so a long
episode on a huge page opens at once. ``serve.serve_viewer`` serves the same pages and
follows episodes still running. ``playwright_trace`` records Playwright traces per step.
"""
