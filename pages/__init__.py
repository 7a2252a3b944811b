"""The app's pages (one module a page) and, in ``_app``, the code only the app needs."""
