"""Sphinx configuration of the cunumpy documentation (`make docs` -> build/docs/html).

The API pages document the installed package (`make docs` installs it into .venv first),
so what the site shows is what `import cunumpy` gives.
"""

import cunumpy

project = "cunumpy"
author = "the cunumpy developers"
copyright = "the cunumpy developers, BSD-3-Clause"
release = cunumpy.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "numpydoc",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build"]

# MyST: ::: fences for admonitions, headings get anchors for in-page links.
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# API pages: members in source order, private names left out; numpydoc renders the sections.
autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "none"
autodoc_preserve_defaults = True
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

html_theme = "pydata_sphinx_theme"
html_title = f"cunumpy {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "navbar_align": "left",
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_show_sourcelink = False
html_copy_source = False
html_static_path = ["_static"]
# Code blocks wrap and tables fit at any width (tests/docs/test_site.py checks 1280 px).
html_css_files = ["cunumpy.css"]
# The top-level pages without sub-pages get no left sidebar: the theme would show an empty
# "Section Navigation" heading there, and the article gets the room instead.
html_sidebars = {page: [] for page in ("index", "install", "getting-started", "changelog", "compatibility")}


def _drop_module_docstrings(app, what, name, obj, options, lines):
    # A module's docstring is written for the people who work on it (layout, C core,
    # spec sections); each API page has its own introduction for users instead.
    if what == "module":
        lines[:] = []


def setup(app):
    app.connect("autodoc-process-docstring", _drop_module_docstrings)
