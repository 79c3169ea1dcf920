// Package docs_test checks the documentation's relative links: every link in README.md and in
// the Markdown files under docs/ names a file or directory that exists, and a link with a
// #fragment into a Markdown file names a heading of that file, slugged as GitHub slugs it.
package docs_test

import (
	"iter"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository root, relative to this package's directory.
const root = "../.."

func TestRelativeLinksResolve(t *testing.T) {
	files := markdownFiles(t)
	anchors := map[string]map[string]bool{} // Markdown file -> its heading slugs
	anchorsOf := func(file string) map[string]bool {
		if a, ok := anchors[file]; ok {
			return a
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		a := headingSlugs(string(b))
		anchors[file] = a
		return a
	}
	checked := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links(string(b)) {
			if isExternal(l.target) {
				continue
			}
			checked++
			where := rel(file) + ":" + strconv.Itoa(l.line)
			path, fragment, _ := strings.Cut(l.target, "#")
			target := file
			if path != "" {
				target = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s: link %q: %s does not exist", where, l.target, rel(target))
					continue
				}
			}
			if fragment == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s: link %q: a #fragment into a file that is not Markdown", where, l.target)
				continue
			}
			if !anchorsOf(target)[fragment] {
				t.Errorf("%s: link %q: %s has no heading whose slug is %q", where, l.target, rel(target), fragment)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the link pattern reads nothing")
	}
}

// TestHeadingSlugs holds the slugger to GitHub's rule on headings of the kinds the docs have.
func TestHeadingSlugs(t *testing.T) {
	for heading, want := range map[string]string{
		"Your first policy in five minutes":                                              "your-first-policy-in-five-minutes",
		"The call's view: `call`, and functions for paths, URLs, IPs and shell commands": "the-calls-view-call-and-functions-for-paths-urls-ips-and-shell-commands",
		"What the manager may do, and what remains cluster-wide":                         "what-the-manager-may-do-and-what-remains-cluster-wide",
		"What `make demo` shows":                                                         "what-make-demo-shows",
		"Testing a policy before it ships: gatectl":                                      "testing-a-policy-before-it-ships-gatectl",
		"@ai-sdk/harness settings":                                                       "ai-sdkharness-settings",
		"A [linked](x.md) heading_with_underscore":                                       "a-linked-heading_with_underscore",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
	doc := "# A\n\n## Same\n\n```\n# not a heading\n```\n\n## Same\n"
	for _, want := range []string{"a", "same", "same-1"} {
		if !headingSlugs(doc)[want] {
			t.Errorf("headingSlugs: no %q in %v", want, headingSlugs(doc))
		}
	}
	if headingSlugs(doc)["not-a-heading"] {
		t.Error("headingSlugs read a line inside a code block as a heading")
	}
}

// markdownFiles are README.md and every .md file under docs/.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

type link struct {
	target string
	line   int
}

var (
	// inlineLink is [text](target) or ![alt](target), with an optional "title".
	inlineLink = regexp.MustCompile(`!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// codeSpan is inline code, whose brackets are not links.
	codeSpan = regexp.MustCompile("`[^`]*`")
)

// links are the inline links of a Markdown document outside code blocks and code spans.
func links(doc string) []link {
	var out []link
	for i, line := range prose(doc) {
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, "``"), -1) {
			out = append(out, link{target: m[1], line: i + 1})
		}
	}
	return out
}

// prose yields the lines of a Markdown document outside fenced code blocks, with their index.
func prose(doc string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		fence := ""
		for i, line := range strings.Split(doc, "\n") {
			if f, ok := fenceOf(line); ok {
				switch {
				case fence == "":
					fence = f
				case strings.HasPrefix(strings.TrimSpace(line), fence):
					fence = ""
				}
				continue
			}
			if fence == "" && !yield(i, line) {
				return
			}
		}
	}
}

// fenceOf reports whether line opens or closes a fenced code block, and its fence.
func fenceOf(line string) (string, bool) {
	s := strings.TrimLeft(line, " ")
	if len(line)-len(s) > 3 {
		return "", false
	}
	for _, c := range []string{"```", "~~~"} {
		if strings.HasPrefix(s, c) {
			n := len(s) - len(strings.TrimLeft(s, c[:1]))
			return strings.Repeat(c[:1], n), true
		}
	}
	return "", false
}

func isExternal(target string) bool {
	if strings.HasPrefix(target, "//") {
		return true
	}
	scheme, _, ok := strings.Cut(target, ":")
	return ok && uriScheme.MatchString(scheme)
}

// uriScheme is the scheme of an absolute URL (https, mailto, …).
var uriScheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*$`)

// headingSlugs are the anchors GitHub gives a document's ATX headings (# to ######) outside
// code blocks: the slug of each, a repeated one suffixed -1, -2, ….
func headingSlugs(doc string) map[string]bool {
	slugs := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose(doc) {
		text, ok := headingText(line)
		if !ok {
			continue
		}
		s := slug(text)
		if n := seen[s]; n > 0 {
			slugs[s+"-"+strconv.Itoa(n)] = true
		} else {
			slugs[s] = true
		}
		seen[s]++
	}
	return slugs
}

// headingText is the text of an ATX heading line, without its #s and closing sequence.
func headingText(line string) (string, bool) {
	s := strings.TrimLeft(line, " ")
	if len(line)-len(s) > 3 {
		return "", false
	}
	n := len(s) - len(strings.TrimLeft(s, "#"))
	if n < 1 || n > 6 || (len(s) > n && s[n] != ' ' && s[n] != '\t') {
		return "", false
	}
	text := strings.TrimSpace(s[n:])
	if t := strings.TrimRight(text, "#"); t != text && (t == "" || strings.HasSuffix(t, " ")) {
		text = strings.TrimSpace(t)
	}
	return text, true
}

// linkText replaces a link or image in a heading by its text, as the rendered heading shows it.
var linkText = regexp.MustCompile(`!?\[((?:[^\]\\]|\\.)*)\]\([^)]*\)`)

// slug is GitHub's anchor for a heading's text: the rendered text in lower case, every
// character but letters, marks, digits, connector punctuation (_), spaces and hyphens dropped,
// and each space a hyphen.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(linkText.ReplaceAllString(heading, "$1")) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.Pc):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// rel names a file relative to the repository root, for messages.
func rel(path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return filepath.ToSlash(r)
	}
	return path
}
