package gate

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// atomicWriterData is the symlink through which the kubelet's atomic writer publishes a
// volume: every file of the volume is a symlink into it, and it is swapped, atomically, to a
// new timestamped directory when the volume's content changes.
const atomicWriterData = "..data"

// LoadLayered loads the layers of the bundle in dir that apply to the hook's pod: the index
// (LayersFileName, which must be there), the namespace's snapshot when the index says it has
// one, the pod's labels when a layer selects by them, the snapshot (and checked rules file) of
// each cluster layer that selects the pod, and the pod's name (Caller). Every file is read from
// one version of the volume: dir/..data is resolved once, when there is one, and the files are
// read from where it points, so a kubelet update between two reads cannot mix two bundles.
// Errors are *SnapshotError naming the file or the layer.
func LoadLayered(dir, workspace string) (*LayerSet, error) {
	root, err := resolveVolume(dir)
	if err != nil {
		return nil, err
	}
	return loadLayered(root, workspace, false)
}

// LoadLayeredNoPod is LoadLayered for a surface that has no pod (NewLayerSetNoPod): every
// cluster layer applies, and no pod labels or name are read.
func LoadLayeredNoPod(dir, workspace string) (*LayerSet, error) {
	root, err := resolveVolume(dir)
	if err != nil {
		return nil, err
	}
	return loadLayered(root, workspace, true)
}

// resolveVolume returns the directory the volume at dir is read from: where dir/..data points
// when the kubelet's atomic writer published it, else dir itself.
func resolveVolume(dir string) (string, error) {
	data := filepath.Join(dir, atomicWriterData)
	if _, err := os.Lstat(data); errors.Is(err, fs.ErrNotExist) {
		return dir, nil
	} else if err != nil {
		return "", &SnapshotError{CodeSnapshotCorrupt, "the policy volume cannot be read: " + err.Error()}
	}
	root, err := filepath.EvalSymlinks(data)
	if err != nil {
		return "", &SnapshotError{CodeSnapshotMissing, "the policy volume's " + data + " cannot be resolved: " + err.Error()}
	}
	return root, nil
}

func loadLayered(root, workspace string, noPod bool) (*LayerSet, error) {
	data, rerr := readBounded(filepath.Join(root, LayersFileName), "policy layers index", maxSnapshotBytes)
	if rerr != nil {
		return nil, rerr
	}
	idx, err := LoadLayersIndex(data, workspace)
	if err != nil {
		return nil, err
	}
	var primary *Snapshot
	if idx.Namespaced {
		if primary, err = loadSnapshotFile(filepath.Join(root, SnapshotFileName), filepath.Join(root, CheckedFileName), workspace); err != nil {
			return nil, err
		}
	}
	var labels map[string]string
	if !noPod {
		if labels, err = podLabels(root, idx); err != nil {
			return nil, err
		}
	}
	layers := make(map[string]*Snapshot)
	for i := range idx.Layers {
		l := &idx.Layers[i]
		if !noPod && !l.Selects(labels) {
			continue // not read: it does not apply to this pod
		}
		s, err := loadSnapshotFile(filepath.Join(root, l.File), filepath.Join(root, ClusterLayerCheckedFile(l.Name)), workspace)
		if err != nil {
			se := &SnapshotError{CodeSnapshotCorrupt, err.Error()}
			errors.As(err, &se)
			return nil, &SnapshotError{se.Code, "cluster layer " + l.Name + ": " + se.Reason}
		}
		layers[l.Name] = s
	}
	if noPod {
		return NewLayerSetNoPod(idx, primary, layers)
	}
	set, err := NewLayerSet(idx, primary, layers, labels)
	if err != nil {
		return nil, err
	}
	set.Caller = Caller{Pod: readName(filepath.Join(root, PodNameFile))}
	return set, nil
}

// podLabels reads the pod's labels when a layer of the index selects pods by them: otherwise
// they are not needed, and nil. A needed file that is absent or malformed is a fault, since
// without it the gate cannot tell which policies govern the pod.
func podLabels(root string, idx *LayersIndex) (map[string]string, error) {
	var selecting *Layer
	for i := range idx.Layers {
		if len(idx.Layers[i].PodSelector) > 0 {
			selecting = &idx.Layers[i]
			break
		}
	}
	if selecting == nil {
		return nil, nil
	}
	path := filepath.Join(root, PodLabelsFile)
	data, rerr := readBounded(path, "pod labels file", maxPodLabelsBytes)
	if rerr != nil {
		rerr.Reason += ", which cluster layer " + selecting.Name + " selects pods by"
		return nil, rerr
	}
	labels, err := ParsePodLabels(data)
	if err != nil {
		return nil, &SnapshotError{CodeSnapshotCorrupt, "the pod labels file " + path + " is malformed: " + err.Error()}
	}
	return labels, nil
}
