"""The browser page's files (HTML, CSS, ES modules), served by :mod:`..pages`; no Python here."""
