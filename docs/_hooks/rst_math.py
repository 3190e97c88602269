"""mkdocs hook: render the numpydoc ``:math:`...``` roles of the docstrings with MathJax.

The docstrings follow numpy/scipy (reStructuredText roles); mkdocstrings renders the role's
argument as inline code, which this hook turns into arithmatex spans for MathJax.
"""

from __future__ import annotations

import re

_ROLE = re.compile(r":math:<code>(.*?)</code>", re.S)


def on_page_content(html, page, config, files):
    return _ROLE.sub(lambda m: f'<span class="arithmatex">\\({m.group(1)}\\)</span>', html)
