"""The app's views of one text (the navigation's "Views" section), one module a page, each a
``page()`` function that app.py's router runs."""
