package clusterstore

// Records: small named records kept as ConfigMaps in one namespace, for a controller that must
// remember work across its restarts (the App's teardown journal). Each record is one ConfigMap,
// af-record-<kind>-<hash of the key>, labelled dev.antifailure.record=<kind>, holding the key
// and the data; one object per record, so concurrent writers of different records never
// conflict.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// LabelManagedBy marks what af made (the runtime's label of the same name).
const LabelManagedBy = "app.kubernetes.io/managed-by"

// LabelRecord marks a record's ConfigMap with its kind.
const LabelRecord = "dev.antifailure.record"

// Records is one kind of record in one namespace.
type Records struct {
	api       API
	namespace string
	kind      string
}

// NewRecords returns the records of kind (a DNS label, e.g. "teardown") in namespace on api.
// Nothing is asked of the cluster until they are used.
func NewRecords(api API, namespace, kind string) *Records {
	return &Records{api: api, namespace: namespace, kind: kind}
}

func (s *Records) name(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "af-record-" + s.kind + "-" + hex.EncodeToString(sum[:10])
}

func (s *Records) doing(what, key string) string {
	return fmt.Sprintf("%s record %q (ConfigMap %s/%s)", what, key, s.namespace, s.name(key))
}

// Put stores data under key, replacing what was there.
func (s *Records) Put(ctx context.Context, key string, data []byte) error {
	cs, explain, err := s.api.API(ctx)
	if err != nil {
		return err
	}
	cms := cs.CoreV1().ConfigMaps(s.namespace)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: s.name(key), Labels: map[string]string{LabelRecord: s.kind, LabelManagedBy: "af"}},
		BinaryData: map[string][]byte{"key": []byte(key), "data": data},
	}
	for try := 0; ; try++ {
		_, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return explain(s.doing("writing", key), err)
		}
		old, err := cms.Get(ctx, cm.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // deleted meanwhile: create it again
		}
		if err != nil {
			return explain(s.doing("reading", key), err)
		}
		old.Labels, old.BinaryData, old.Data = cm.Labels, cm.BinaryData, nil
		_, err = cms.Update(ctx, old, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if !(apierrors.IsConflict(err) || apierrors.IsNotFound(err)) || try >= 4 {
			return explain(s.doing("updating", key), err)
		}
	}
}

// Delete removes key's record; one not there is no error.
func (s *Records) Delete(ctx context.Context, key string) error {
	cs, explain, err := s.api.API(ctx)
	if err != nil {
		return err
	}
	err = cs.CoreV1().ConfigMaps(s.namespace).Delete(ctx, s.name(key), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return explain(s.doing("deleting", key), err)
	}
	return nil
}

// List returns every record of the kind, by key.
func (s *Records) List(ctx context.Context) (map[string][]byte, error) {
	cs, explain, err := s.api.API(ctx)
	if err != nil {
		return nil, err
	}
	list, err := cs.CoreV1().ConfigMaps(s.namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.Set{LabelRecord: s.kind}.String()})
	if err != nil {
		return nil, explain(fmt.Sprintf("listing the %s records in %s", s.kind, s.namespace), err)
	}
	out := make(map[string][]byte, len(list.Items))
	for _, cm := range list.Items {
		k, ok := cm.BinaryData["key"]
		if !ok || cm.Name != s.name(string(k)) {
			continue // not one of ours, whatever its label says
		}
		out[string(k)] = cm.BinaryData["data"]
	}
	return out, nil
}
