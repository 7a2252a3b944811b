"""The paper's Tables 1-4 on the embedded models (`python -m bench.paper_tables`, `make
paper-tables`), written into docs/results.md beside the paper's figures.

__main__ (the command: the plan, the runs, the section written), runs (sizes, results folders,
time log, the plan of resumable parts), section (the tables from the results folders, with
section.md, the section's prose) and figures (the paper's own figures; bench.scale reads Table 2's
speedups).
"""
