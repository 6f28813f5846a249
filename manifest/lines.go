package manifest

import (
	"fmt"

	yamlv3 "go.yaml.in/yaml/v3"
)

// lineIndex maps field paths (as Problem.Path writes them) to the 1-based line they start on.
// It is best effort: a document the node parser cannot read yields an empty index.
func lineIndex(data []byte) map[string]int {
	idx := map[string]int{}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return idx
	}
	if doc.Kind == yamlv3.DocumentNode && len(doc.Content) == 1 {
		indexNode("", doc.Content[0], idx, 0)
	}
	return idx
}

func indexNode(path string, n *yamlv3.Node, idx map[string]int, depth int) {
	if depth > maxDepth || n == nil {
		return
	}
	switch n.Kind {
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := joinKey(path, k.Value)
			if _, seen := idx[p]; !seen {
				idx[p] = k.Line
			}
			indexNode(p, v, idx, depth+1)
		}
	case yamlv3.SequenceNode:
		for i, v := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			idx[p] = v.Line
			indexNode(p, v, idx, depth+1)
		}
	}
}

// lineFor returns the line of path, or of its nearest indexed parent.
func lineFor(idx map[string]int, path string) int {
	for p := path; p != ""; p = parentPath(p) {
		if l, ok := idx[p]; ok {
			return l
		}
	}
	return 0
}

func parentPath(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		switch p[i] {
		case '.':
			return p[:i]
		case '[':
			return p[:i]
		}
	}
	return ""
}
