"""The app's downstream-task pages (the navigation's "Downstream tasks" section): Q&A,
translation and the results folders, one module a page, each a ``page()`` function."""
