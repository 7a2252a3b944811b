"""Code only the Streamlit app needs: its defaults, cached loaders, shared inputs and widgets,
live runs with Stop, error messages and the downstream tasks' drill-down tables.

The library (``marginal_core``) holds what a script or notebook needs and never imports
Streamlit; this package is the app's side of that line.
"""
