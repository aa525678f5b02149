"""app: the Panel workbench in the browser and the ``attention-workbench`` command line.

Deliberately empty: importing one submodule (for example ``app.cli``) should not load the rest
of the app. The numeric work lives in ``attention_core``; this package only presents it.
"""
