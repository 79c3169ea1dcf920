package gate

import (
	"bytes"
	"fmt"
	"strconv"
)

// maxPodLabelsBytes bounds the pod labels file: 256 KiB, what the API server allows all of an
// object's annotations, is far more than any pod's labels take.
const maxPodLabelsBytes = 256 << 10

// ParsePodLabels parses the pod labels file (PodLabelsFile) as the kubelet writes a
// downwardAPI metadata.labels item: one key="value" line per label, the value Go-quoted, with
// or without a newline after the last. It is strict: a line that is not a label key, '=' and
// one quoted label value, or a key given twice, is an error, since a file the kubelet did not
// write cannot say which layers select the pod. An empty file is a pod without labels.
func ParsePodLabels(data []byte) (map[string]string, error) {
	if len(data) > maxPodLabelsBytes {
		return nil, fmt.Errorf("the pod labels are larger than %d bytes", maxPodLabelsBytes)
	}
	labels := map[string]string{}
	data = bytes.TrimSuffix(data, []byte("\n"))
	if len(data) == 0 {
		return labels, nil
	}
	for n, line := range bytes.Split(data, []byte("\n")) {
		key, quoted, ok := bytes.Cut(line, []byte("="))
		if !ok || len(quoted) == 0 || quoted[0] != '"' {
			return nil, fmt.Errorf("line %d of the pod labels is not key=\"value\"", n+1)
		}
		if !isLabelKey(string(key)) {
			return nil, fmt.Errorf("line %d of the pod labels does not start with a label key", n+1)
		}
		value, err := strconv.Unquote(string(quoted))
		if err != nil || !isLabelValue(value) {
			return nil, fmt.Errorf("line %d of the pod labels does not hold one quoted label value", n+1)
		}
		if _, dup := labels[string(key)]; dup {
			return nil, fmt.Errorf("line %d of the pod labels repeats the key %q", n+1, key)
		}
		labels[string(key)] = value
	}
	return labels, nil
}
