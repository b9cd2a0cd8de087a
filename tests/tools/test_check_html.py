"""The browser check's own logic, on small pages (the real pages run in `make check-html`)."""

from tools.authoring import check_html

EXPECTED = {"title": "Attention", "figures": 2, "tables": 1, "bertviz": True, "solutions": 1,
            "diagrams": ["attention.svg"], "collapsed": 1, "equations": True}
GOOD = ('<link href="../_static/book.css" rel="stylesheet">'
        '<h1>03 · Attention<a class="headerlink">#</a></h1>'
        '<div class="dropdown admonition"><p>Solution</p></div>'
        '<img alt="x" src="../_images/a.png"><img alt="y" src="../_images/b.png">'
        '<table></table><a href="https://colab.research.google.com/github/o/r/blob/main/x">'
        '</a><svg><line></line></svg><img alt="d" src="../_images/attention.svg">'
        '<details class="admonition hide above-input"><summary>Show code cell source</summary>'
        '<pre>import torch</pre></details><mjx-container class="MathJax"></mjx-container>')


def test_a_complete_page_passes():
    assert check_html.check_page(GOOD, EXPECTED) == []


def test_each_missing_piece_is_named():
    blank_view = GOOD.replace("<line></line>", "")
    assert check_html.check_page(blank_view, EXPECTED) == ["the bertviz view drew no lines"]
    one_figure = GOOD.replace('<img alt="y" src="../_images/b.png">', "")
    assert check_html.check_page(one_figure, EXPECTED) == [
        "1 figures shown, the notebook made 2"]
    assert check_html.check_page(GOOD.replace("dropdown admonition", "admonition"),
                                 EXPECTED) == ["0 collapsed solutions, the chapter has 1"]
    assert check_html.check_page(GOOD + "<h3>### BEGIN SOLUTION</h3>", EXPECTED) == [
        "'BEGIN SOLUTION' shows on the page"]
    assert check_html.check_page(GOOD.replace("attention.svg", "other.svg"), EXPECTED) == [
        "the diagram attention.svg is not on the page"]
    assert check_html.check_page(GOOD.replace("hide above-input", "above-input"), EXPECTED) == [
        "0 collapsed code cells, the chapter has 1"]
    raw_tex = GOOD.replace('<mjx-container class="MathJax"></mjx-container>', r"\\[x\\]")
    assert check_html.check_page(raw_tex, EXPECTED) == [
        "the equations are not rendered (MathJax did not run)"]
    assert "not in the page's <h1>" in check_html.check_page(
        GOOD.replace("Attention", "Masking"), EXPECTED)[0]


def test_offline_copy_points_bertviz_at_local_files(tmp_path):
    html, vendor = tmp_path / "html", tmp_path / "vendor"
    (html / "chapters").mkdir(parents=True)
    (html / "_static").mkdir()
    cdn = check_html.CDN
    (html / "chapters" / "03.html").write_text(
        f'<script src="{cdn}require.js/2.3.6/require.min.js"></script>'
        f"<script>require.config({{paths: {{d3: '{cdn}d3/5.7.0/d3.min'}}}})</script>")
    for source in check_html.LOCAL_COPIES.values():
        file = vendor / (source if source.endswith(".js") else source + ".js")
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text("// library")
    check_html.offline_copy(html, vendor, tmp_path / "site")
    page = (tmp_path / "site" / "chapters" / "03.html").read_text()
    assert cdn not in page
    assert '"../_static/vendor/requirejs/require.js"' in page
    assert "'../_static/vendor/d3/dist/d3.min'" in page
    assert (tmp_path / "site" / "_static" / "vendor" / "d3" / "dist" / "d3.min.js").exists()
