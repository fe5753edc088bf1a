# IPython kernel configuration of the project's environment: scripts/install_kernel_config.sh
# (run by scripts/bootstrap.sh and binder/postBuild) copies it to ENV/etc/ipython/, where every
# kernel of that environment reads it. It loads widgets.kernel_warm, which, in a JupyterLab
# document's kernel only, warms the first GraphView in the background while the user reads
# (EXPLORER_NO_KERNEL_WARM=1 switches that off, EXPLORER_NO_WARMUP=1 every warm-up).
c = get_config()  # noqa: F821 (IPython's config loader defines get_config)
c.InteractiveShellApp.extensions.append("widgets.kernel_warm")
