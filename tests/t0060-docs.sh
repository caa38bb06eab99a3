#!/bin/sh
# Rule checked: the documentation holds together (README.md, docs/*.md).
# 1. Every relative link in README.md and docs/*.md names a file or folder
#    that exists, and every #anchor names a heading of its target (GitHub's
#    anchors: lower case, punctuation dropped, spaces as dashes).
# 2. No link leaves the repository: no URL with a scheme, no bare URL in
#    the text, no path (linked, or named in the text or inline code) that
#    climbs above the repository's root.
# 3. README.md is a front door: at most 350 lines.
# 4. No issue numbers in README.md or docs/ ("issue 12", "(issue").
# 5. The README's two commands are there, in this order:
#    sh deploy/local/demo.sh, then sh tests/run-all.sh.
# 6. The link checker itself refuses a planted broken link, a broken
#    anchor and a link out of the repository (on a copy), so a broken
#    check cannot pass silently.
# Links are looked for outside code: fenced blocks and `inline code` are
# skipped.  Checks 1, 2 and 6 need python3 (a build dependency).
set -u
src=${EC_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
tmp=$(mktemp -d /tmp/ec-t0060-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
echo "1..6"

# The link checker: python3 check.py ROOT MODE (MODE: links or outside)
# prints one line per problem, exits 1 when there is one.
cat >"$tmp/check.py" <<'EOF'
import os, re, sys, unicodedata

root, mode = os.path.abspath(sys.argv[1]), sys.argv[2]
docs = ['README.md'] + sorted('docs/' + f for f in os.listdir(os.path.join(root, 'docs'))
                              if f.endswith('.md')) if os.path.isdir(os.path.join(root, 'docs')) \
    else ['README.md']

def prose(path):
    """(first line number, text with inline code removed, text) of each paragraph outside fenced
    and indented code: a link's text may run over two lines"""
    fence, para, start = None, [], 0

    def done():
        raw = ' '.join(para)
        return start, re.sub(r'(`+)(?:(?!\1).)*?\1', '', raw), raw
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            s = line.strip()
            m = re.match(r'(`{3,}|~{3,})', s)
            code = fence is not None or m or ((line.startswith('    ') or line.startswith('\t')) and not para)
            if code or not s:
                if para:
                    yield done()
                    para = []
                if fence is None and m:
                    fence = m.group(1)[0] * 3
                elif fence is not None and s.startswith(fence):
                    fence = None
                continue
            if not para:
                start = n
            para.append(s)
    if para:
        yield done()

def slug(title):
    t = re.sub(r'[`*~]|<[^>]*>', '', title.strip())
    t = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', t).lower()
    out = ''.join(c for c in t if c in ' -_' or unicodedata.category(c)[0] in 'LNM')
    return out.replace(' ', '-')

_anchors = {}
def anchors(path):
    if path not in _anchors:
        seen, fence = {}, None
        with open(path, encoding='utf-8') as f:
            for line in f:
                s = line.strip()
                m = re.match(r'(`{3,}|~{3,})', s)
                if fence is None and m:
                    fence = m.group(1)[0] * 3
                    continue
                if fence is not None:
                    if s.startswith(fence):
                        fence = None
                    continue
                h = re.match(r' {0,3}#{1,6}\s+(.*?)\s*#*\s*$', line)
                if h:
                    a = slug(h.group(1))
                    k = seen.get(a, 0)
                    seen[a] = k + 1
                    seen.setdefault(a if k == 0 else '%s-%d' % (a, k), 1)
        _anchors[path] = set(seen)
    return _anchors[path]

link = re.compile(r'!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)')
bad = 0
def problem(doc, n, msg):
    global bad
    bad = 1
    print('%s:%d: %s' % (doc, n, msg))

for doc in docs:
    path = os.path.join(root, doc)
    if not os.path.isfile(path):
        continue
    for n, line, raw in prose(path):
        targets = [m.group(1) for m in link.finditer(line)]
        targets += re.findall(r'<([a-zA-Z][a-zA-Z0-9+.-]*:[^>\s]*)>', line)
        rest = link.sub('', line)
        if mode == 'outside':
            for u in re.findall(r'\b(?:https?|ftp)://\S+|\bwww\.\S+', rest):
                problem(doc, n, 'a URL in the text leaves the repository: ' + u)
            # a path named in the text or in inline code that climbs out
            for u in re.findall(r'(?<![\w/.])((?:\.\./)+[\w.-][\w./-]*)', raw):
                t = os.path.normpath(os.path.join(os.path.dirname(path), u))
                if t != root and not t.startswith(root + os.sep):
                    problem(doc, n, 'a path out of the repository: ' + u)
        for t in targets:
            if re.match(r'[a-zA-Z][a-zA-Z0-9+.-]*:', t) or t.startswith('//'):
                if mode == 'outside':
                    problem(doc, n, 'link leaves the repository: ' + t)
                continue
            file, _, frag = t.partition('#')
            if file.startswith('/'):
                if mode == 'outside':
                    problem(doc, n, 'absolute path (not relative to this file): ' + t)
                continue
            target = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            if target != root and not target.startswith(root + os.sep):
                if mode == 'outside':
                    problem(doc, n, 'link climbs out of the repository: ' + t)
                continue
            if mode != 'links':
                continue
            if not os.path.exists(target):
                problem(doc, n, 'no such file: ' + t)
            elif frag and not target.endswith('.md'):
                problem(doc, n, 'an anchor into a file that is not Markdown: ' + t)
            elif frag and frag not in anchors(target):
                problem(doc, n, 'no heading for #%s in %s' % (frag, os.path.relpath(target, root)))
sys.exit(bad)
EOF

have_python=false
command -v python3 >/dev/null 2>&1 && have_python=true

# check N MODE DESCRIPTION: run the checker on the source tree
check() {
    if ! $have_python; then
        echo "ok $1 # SKIP no python3 to read the links with"
        return
    fi
    if python3 "$tmp/check.py" "$src" "$2" >"$tmp/out.$1" 2>&1; then
        echo "ok $1 - $3"
    else
        echo "not ok $1 - $3:"
        sed 's/^/# /' "$tmp/out.$1"
    fi
}

check 1 links "every relative link in README.md and docs/*.md resolves, anchors included"
check 2 outside "no link in README.md or docs/*.md leaves the repository"

# 3: the README is short
lines=$(wc -l <"$src/README.md")
if [ "$lines" -le 350 ]; then
    echo "ok 3 - README.md has $lines lines (at most 350)"
else
    echo "not ok 3 - README.md has $lines lines: at most 350; move the details into docs/"
fi

# 4: no issue numbers
(cd "$src" && grep -n -i -e 'issue [0-9]' -e '(issue' README.md docs/*.md) >"$tmp/issues" 2>/dev/null || true
if [ -s "$tmp/issues" ]; then
    echo "not ok 4 - issue numbers in the documentation (say what, not which issue):"
    sed 's/^/# /' "$tmp/issues"
else
    echo "ok 4 - no issue numbers in README.md or docs/"
fi

# 5: the two commands, in order
demo=$(grep -n -x '    sh deploy/local/demo.sh' "$src/README.md" | head -n 1 | cut -d: -f1)
all=$(grep -n -x '    sh tests/run-all.sh' "$src/README.md" | head -n 1 | cut -d: -f1)
if [ -n "$demo" ] && [ -n "$all" ] && [ "$demo" -lt "$all" ]; then
    echo "ok 5 - README.md gives sh deploy/local/demo.sh (line $demo), then sh tests/run-all.sh (line $all)"
else
    echo "not ok 5 - README.md must show '    sh deploy/local/demo.sh' then '    sh tests/run-all.sh'" \
        "(found at lines '${demo:-none}' and '${all:-none}')"
fi

# 6: the checker catches what it is for, on a copy with planted faults
if ! $have_python; then
    echo "ok 6 # SKIP no python3 to read the links with"
else
    # README.md and docs/ copied, everything else of the tree linked in
    mkdir -p "$tmp/copy/docs"
    cp "$src/README.md" "$tmp/copy/" && cp "$src"/docs/*.md "$tmp/copy/docs/"
    for e in "$src"/* "$src"/.[!.]*; do
        [ -e "$e" ] || continue
        case ${e##*/} in README.md | docs) ;; *) ln -s "$e" "$tmp/copy/${e##*/}" ;; esac
    done
    python3 "$tmp/check.py" "$tmp/copy" links >/dev/null 2>&1 && python3 "$tmp/check.py" "$tmp/copy" outside >/dev/null 2>&1
    clean=$?
    cat >>"$tmp/copy/docs/planted.md" <<'EOF'
# Planted

See [a missing page](no-such-page.md), [a missing heading](../README.md#no-such-heading),
[the outside](../../elsewhere/architecture.md) and [the web](https://example.org/).
A link in code is not a link: `[x](nowhere.md)`.
EOF
    python3 "$tmp/check.py" "$tmp/copy" links >"$tmp/planted" 2>&1
    python3 "$tmp/check.py" "$tmp/copy" outside >>"$tmp/planted" 2>&1
    missing=""
    for want in 'no such file: no-such-page.md' 'no heading for #no-such-heading' \
        'climbs out of the repository: ../../elsewhere' 'leaves the repository: https://example.org/'; do
        grep -q -F "$want" "$tmp/planted" || missing="$missing; $want"
    done
    grep -q 'nowhere.md' "$tmp/planted" && missing="$missing; (a link in inline code was reported)"
    if [ "$clean" -eq 0 ] && [ -z "$missing" ]; then
        echo "ok 6 - the checker refuses a planted missing page, missing heading and links out of the repository"
    else
        echo "not ok 6 - the checker does not catch what it should (copy clean: $clean; missed$missing):"
        sed 's/^/# /' "$tmp/planted"
    fi
fi
