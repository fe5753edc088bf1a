"""Browser tests: real JupyterLab pages driven by headless Chromium through Playwright."""
