"""The paper's own figures for Tables 1-4 (decoding-free-marginalization.tex).

bench.paper_tables prints them beside its runs'; bench.scale reads Table 2's speedups.
"""

PAPER_T1 = {  # model -> (mean, sd) of rho at |s| ~ 50, 100, 300
    "Llama2-7b": ((0.70, 0.16), (0.66, 0.10), (0.75, 0.11)),
    "Llama2-13b": ((0.64, 0.15), (0.68, 0.11), (0.76, 0.09)),
    "Gemma3-1b": ((0.69, 0.17), (0.63, 0.14), (0.65, 0.12)),
    "Gemma3-4b": ((0.71, 0.19), (0.58, 0.13), (0.58, 0.11)),
    "Gemma3-12b": ((0.80, 0.13), (0.70, 0.12), (0.64, 0.09)),
}
PAPER_T2 = {  # (model, dataset) -> (canon, proxy, lattice, speedup)
    ("Llama2-7b", "Book"): (49.8, 48.1, 47.3, 3.8), ("Llama2-7b", "Med"): (29.0, 31.7, 31.3, 4.8),
    ("Llama2-7b", "Arc"): (51.5, 49.0, 47.1, 4.5), ("Llama2-13b", "Book"): (63.7, 61.6, 59.6, 8.4),
    ("Llama2-13b", "Med"): (36.6, 40.7, 39.0, 8.6), ("Llama2-13b", "Arc"): (68.6, 65.3, 61.9, 5.4),
    ("Gemma3-1b", "Book"): (38.8, 32.4, 42.4, 3.3), ("Gemma3-1b", "Med"): (32.4, 29.8, 31.9, 2.4),
    ("Gemma3-1b", "Arc"): (47.7, 36.9, 38.2, 1.4), ("Gemma3-4b", "Book"): (67.8, 32.2, 52.9, 6.2),
    ("Gemma3-4b", "Med"): (46.4, 29.9, 37.3, 7.6), ("Gemma3-4b", "Arc"): (78.3, 39.5, 61.5, 7.5),
    ("Gemma3-27b", "Book"): (84.0, 46.0, 67.5, 36.5), ("Gemma3-27b", "Med"): (67.9, 43.4, 51.9, 30.2),
    ("Gemma3-27b", "Arc"): (93.4, 52.8, 81.1, 22.9),
}
PAPER_T3 = {  # model -> underestimation ratio (%) on Book, Med, Arc, En→De, En→Cs
    "Llama2-7b": (72.3, 76.7, 74.2, None, None), "Llama2-13b": (74.8, 69.1, 72.2, None, None),
    "Gemma3-1b": (76.3, 73.3, 82.8, 52.2, 62.3), "Gemma3-4b": (76.0, 78.8, 82.8, 72.4, 58.3),
    "Gemma3-27b": (76.4, 78.5, 78.1, 72.4, 74.0),
}
PAPER_T4 = {  # (model, direction) -> COMET-22 (canon, proxy, lattice, speedup)
    ("Gemma3-1b", "En→De"): (73.0, 72.7, 73.0, 2.1), ("Gemma3-4b", "En→De"): (80.8, 81.3, 81.2, 2.9),
    ("Gemma3-27b", "En→De"): (84.0, 84.3, 84.0, 9.8), ("Gemma3-1b", "En→Cs"): (65.8, 66.1, 66.8, 2.2),
    ("Gemma3-4b", "En→Cs"): (86.3, 86.2, 86.3, 3.1), ("Gemma3-27b", "En→Cs"): (88.3, 88.1, 88.2, 10.0),
}

