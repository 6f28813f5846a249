package app

import (
	"context"
	"fmt"
	"github.com/antifailure/af/app/clusterstore"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/antifailure/af/github/report"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/kubernetes"
	"github.com/antifailure/af/testcluster"
)

// clusterFixture is the App on the real test cluster: the Kubernetes runtime's Environments and
// Down, the GitHub stand-in with the App installed.
type clusterFixture struct {
	h    *testcluster.Handle
	kube k8s.Interface
	rt   *kubernetes.Runtime
	s    *standin
	srv  *Server
	// journal is the server's, in ConfigMaps of journalNS.
	journal *clusterstore.Records
}

const journalNS = "af-app-journal-test"

func newClusterFixture(t *testing.T) *clusterFixture {
	t.Helper()
	h := testcluster.Require(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", h.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := k8s.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fx := &clusterFixture{h: h, kube: kube, s: newStandin(t)}
	fx.rt = kubernetes.New(kubernetes.Options{Kubeconfig: h.Kubeconfig, DownTimeout: 3 * time.Minute,
		Progress: func(format string, args ...any) { t.Logf("af: "+format, args...) }})
	// The teardown journal in ConfigMaps of a namespace of the test's own, as in af-system.
	// A previous test's may still be terminating: nothing can be created in it (a Lease).
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(250 * time.Millisecond) {
		ns, err := kube.CoreV1().Namespaces().Get(context.Background(), journalNS, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && ns.DeletionTimestamp == nil) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s still terminating: %v", journalNS, err)
		}
	}
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: journalNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), journalNS, metav1.DeleteOptions{}) })
	fx.journal = clusterstore.NewRecords(fx.rt, journalNS, "teardown")
	// The backoff outlasts an API server restart (about 40s here): 1s doubling to 10s, 12 tries.
	fx.srv, err = New(Config{Secret: secret, Cluster: fx.rt, GitHub: fx.s.gh, Workers: 4, ReapInterval: time.Hour, Journal: fx.journal,
		Attempts: 12, Base: time.Second, Max: 10 * time.Second, Log: slog.New(slog.NewTextHandler(testLog{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

// environment makes pull request n's namespace as af up labels it (kubernetes.NamespaceLabels),
// with a running pod in it that ignores SIGTERM for graceSeconds, so its removal takes the
// namespace controller and the kubelet real work. labelled false makes the same name without
// af's labels.
func (fx *clusterFixture) environment(t *testing.T, ns, repo string, n int, expires time.Time, labelled bool, graceSeconds int64) *corev1.Namespace {
	t.Helper()
	ctx := context.Background()
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if labelled {
		obj.Labels, obj.Annotations = kubernetes.NamespaceLabels(fmt.Sprintf("shop-pr-%d", n), repo, n, expires)
	}
	created, err := fx.kube.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = fx.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "work"}, Spec: corev1.PodSpec{
		TerminationGracePeriodSeconds: &graceSeconds,
		Containers: []corev1.Container{{Name: "work", Image: fx.h.TestImage, ImagePullPolicy: corev1.PullNever,
			Command: []string{"sh", "-c", `trap "" TERM; while true; do sleep 1; done`}}}}}
	if _, err := fx.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		p, err := fx.kube.CoreV1().Pods(ns).Get(ctx, "work", metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod in %s not running: %v %v", ns, err, p.Status)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return created
}

func (fx *clusterFixture) gone(ns string) bool {
	_, err := fx.kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

func (fx *clusterFixture) waitGone(t *testing.T, ns string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !fx.gone(ns) {
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s still there after %s", ns, within)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// gonePR waits until pull request n's comment says the environment is gone, for reason, and
// its deployment's last status is inactive (the comment is rewritten first, the deployment
// after it); it fails when there is no deployment of pr-n at all.
func (fx *clusterFixture) gonePR(t *testing.T, n int, reason string) {
	t.Helper()
	state := func() (comment bool, deployment string) {
		cs := fx.s.Comments(n)
		comment = len(cs) == 1 && report.IsGone(cs[0].Body) && strings.Contains(cs[0].Body, reason)
		for _, d := range fx.s.Deployments() {
			if d.Environment == report.Environment(n) && len(d.Statuses) > 0 {
				deployment = d.Statuses[len(d.Statuses)-1].State
			}
		}
		return comment, deployment
	}
	deadline := time.Now().Add(time.Minute)
	for {
		comment, deployment := state()
		if comment && deployment == "inactive" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pull request %d: comment gone for %q: %v; deployment of %s: %q (want inactive); comments %+v",
				n, reason, comment, report.Environment(n), deployment, fx.s.Comments(n))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The App against the real cluster, in the order a demanding operator would try it.
func TestAppOnTheCluster(t *testing.T) {
	fx := newClusterFixture(t)
	defer func() {
		drain(t, fx.srv)
		if recs, err := fx.journal.List(context.Background()); err != nil || len(recs) != 0 {
			t.Errorf("teardown records left after every teardown ended: %v, %v", recs, err)
		}
	}()
	now := time.Now()

	t.Run("closed delivery removes the environment and nothing else", func(t *testing.T) {
		fx.s.preview(t, 101)
		fx.environment(t, "af-env-shop-pr-101", testRepo, 101, time.Time{}, true, 1)
		// Same pull request number, another repository: never touched.
		other := fx.environment(t, "af-env-other-shop-pr-101", "other/shop", 101, time.Time{}, true, 1)
		// The name af would give pull request 102, without af's labels: never touched.
		fx.s.preview(t, 102)
		squatter := fx.environment(t, "af-env-shop-pr-102", "", 0, time.Time{}, false, 1)
		start := time.Now()
		for _, n := range []int{101, 102} {
			if code := post(t, fx.srv.Handler(), fmt.Sprintf("c-%d", n), fx.s.closed(t, n, n == 101)); code != http.StatusAccepted {
				t.Fatal(code)
			}
		}
		fx.waitGone(t, "af-env-shop-pr-101", 3*time.Minute)
		t.Logf("closed → namespace gone in %s", time.Since(start).Round(100*time.Millisecond))
		waitFor(t, time.Minute, func() bool { c := fx.s.Comments(101); return len(c) == 1 && report.IsGone(c[0].Body) })
		fx.gonePR(t, 101, report.ReasonMerged)
		waitFor(t, time.Minute, func() bool {
			return fx.srv.Pool.Depth() == 0 && len(fx.s.Comments(102)) == 1 && report.IsGone(fx.s.Comments(102)[0].Body)
		})
		for _, keep := range []*corev1.Namespace{other, squatter} {
			ns, err := fx.kube.CoreV1().Namespaces().Get(context.Background(), keep.Name, metav1.GetOptions{})
			if err != nil || ns.DeletionTimestamp != nil || ns.ResourceVersion != keep.ResourceVersion {
				t.Fatalf("%s was touched: %v (resourceVersion %s → %s)", keep.Name, err, keep.ResourceVersion, ns.ResourceVersion)
			}
		}
	})

	t.Run("lost webhook: the reaper removes it in one sweep", func(t *testing.T) {
		fx.s.preview(t, 104)
		fx.environment(t, "af-env-shop-pr-104", testRepo, 104, time.Time{}, true, 1)
		fx.s.SetPull(104, "closed", strings.Repeat("a", 40), false) // closed; no delivery came
		sw, err := fx.srv.Reaper.Sweep(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !removes(sw, "af-env-shop-pr-104") || removes(sw, "af-env-other-shop-pr-101") || removes(sw, "af-env-shop-pr-102") {
			t.Fatalf("sweep %+v", sw)
		}
		fx.waitGone(t, "af-env-shop-pr-104", 3*time.Minute)
		waitFor(t, time.Minute, func() bool { c := fx.s.Comments(104); return len(c) == 1 && report.IsGone(c[0].Body) })
		fx.gonePR(t, 104, report.ReasonClosed)
	})

	t.Run("expired TTL: reaped while the pull request is open", func(t *testing.T) {
		fx.s.preview(t, 105)
		fx.environment(t, "af-env-shop-pr-105", testRepo, 105, now.Add(-time.Minute), true, 1)
		fx.s.preview(t, 106)
		fx.environment(t, "af-env-shop-pr-106", testRepo, 106, now.Add(time.Hour), true, 1)
		sw, err := fx.srv.Reaper.Sweep(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !removes(sw, "af-env-shop-pr-105") || removes(sw, "af-env-shop-pr-106") {
			t.Fatalf("sweep %+v", sw)
		}
		fx.waitGone(t, "af-env-shop-pr-105", 3*time.Minute)
		waitFor(t, time.Minute, func() bool { c := fx.s.Comments(105); return len(c) == 1 && report.IsGone(c[0].Body) })
		fx.gonePR(t, 105, report.ReasonExpired)
		if fx.gone("af-env-shop-pr-106") {
			t.Fatal("the environment with time left was removed")
		}
	})

	t.Run("deploy/app's RBAC is enough, and no more", func(t *testing.T) {
		ctx := context.Background()
		rbac, err := os.ReadFile(filepath.Join("..", "deploy", "app", "rbac.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if out, err := fx.h.Kubectl(ctx, string(rbac), "apply", "-f", "-"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		t.Cleanup(func() { _, _ = fx.h.Kubectl(context.Background(), string(rbac), "delete", "--wait=false", "-f", "-") })
		sa := "system:serviceaccount:af-system:af-app"
		for _, c := range []struct {
			verb, resource, want string
		}{
			{"list", "namespaces", "yes"}, {"delete", "namespaces", "yes"}, {"get", "namespaces", "yes"},
			{"create", "namespaces", "no"}, {"update", "namespaces", "no"}, {"get", "secrets", "no"},
			{"delete", "pods", "no"}, {"create", "pods", "no"}, {"list", "networkpolicies", "no"},
			{"create", "configmaps", "no"}, {"list", "configmaps", "no"},
			// The watch: the probe pod and its log by name, no other pod.
			{"get", "pods/af-probe", "yes"}, {"get", "pods/af-probe --subresource=log", "yes"},
			{"get", "pods/other", "no"}, {"get", "pods/other --subresource=log", "no"}, {"list", "pods", "no"},
		} {
			args := append([]string{"auth", "can-i", c.verb}, strings.Fields(c.resource)...)
			out, _ := fx.h.Kubectl(ctx, "", append(args, "--all-namespaces", "--as", sa)...)
			if strings.TrimSpace(out) != c.want {
				t.Errorf("can %s %s %s: %q, want %s", sa, c.verb, c.resource, strings.TrimSpace(out), c.want)
			}
		}
		// The journal's ConfigMaps, in the App's own namespace only.
		for _, c := range []struct {
			verb, ns, want string
		}{
			{"create", "af-system", "yes"}, {"get", "af-system", "yes"}, {"update", "af-system", "yes"}, {"delete", "af-system", "yes"},
			{"list", "af-system", "yes"}, {"watch", "af-system", "no"}, {"create", "default", "no"}, {"get", "kube-system", "no"},
		} {
			out, _ := fx.h.Kubectl(ctx, "", "auth", "can-i", c.verb, "configmaps", "-n", c.ns, "--as", sa)
			if strings.TrimSpace(out) != c.want {
				t.Errorf("can %s %s configmaps in %s: %q, want %s", sa, c.verb, c.ns, strings.TrimSpace(out), c.want)
			}
		}
		// The leader election's Lease: af-app in af-system only.
		for _, c := range []struct{ verb, what, ns, want string }{
			{"create", "leases.coordination.k8s.io", "af-system", "yes"}, {"get", "leases.coordination.k8s.io/af-app", "af-system", "yes"},
			{"update", "leases.coordination.k8s.io/af-app", "af-system", "yes"}, {"update", "leases.coordination.k8s.io/other", "af-system", "no"},
			{"create", "leases.coordination.k8s.io", "default", "no"},
		} {
			out, _ := fx.h.Kubectl(ctx, "", "auth", "can-i", c.verb, c.what, "-n", c.ns, "--as", sa)
			if strings.TrimSpace(out) != c.want {
				t.Errorf("can %s %s %s in %s: %q, want %s", sa, c.verb, c.what, c.ns, strings.TrimSpace(out), c.want)
			}
		}
		path, err := fx.h.KubeconfigAs(ctx, "af-system", "af-app", t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		fx.s.preview(t, 108)
		fx.s.closed(t, 108, false) // closed on GitHub: the teardown reads it again
		fx.environment(t, "af-env-shop-pr-108", testRepo, 108, time.Time{}, true, 1)
		// As the App runs it: the pool, its journal in af-system, all with the account's token.
		asApp := kubernetes.New(kubernetes.Options{Kubeconfig: path, DownTimeout: 3 * time.Minute})
		// The sweep's read of the watch: the account may look (no probe pod here: absent, not
		// refused).
		if w, err := asApp.Watch(ctx, afruntime.Ref{ID: "shop-pr-108", Namespace: "af-env-shop-pr-108", Repository: testRepo}); err != nil || w.State != afruntime.WatchAbsent {
			t.Fatalf("the watch read as the App's service account: %v %+v", err, w)
		}
		journal := clusterstore.NewRecords(asApp, "af-system", "teardown")
		recorded := false
		x := &Teardowner{Cluster: asApp, GitHub: fx.s.gh, Hook: func(ns string, start bool) {
			if start {
				recs, err := journal.List(ctx)
				recorded = err == nil && len(recs) == 1
			}
		}}
		var failed []string
		p := NewPool(1, func(ctx context.Context, td Teardown) error {
			err := x.Run(ctx, td)
			if err != nil {
				failed = append(failed, err.Error())
			}
			return err
		}, nil)
		p.Journal, p.Attempts = journal, 1
		if err := p.Enqueue(Teardown{Delivery: "rbac-108", Repository: testRepo, PullRequest: 108, Reason: report.ReasonClosed}); err != nil {
			t.Fatal(err)
		}
		if left := p.Close(contextWithTimeout(t, 3*time.Minute)); left != 0 || len(failed) > 0 {
			t.Fatalf("teardown as the App's service account: %d left, %v", left, failed)
		}
		if !fx.gone("af-env-shop-pr-108") {
			t.Fatal("not removed")
		}
		fx.gonePR(t, 108, report.ReasonClosed)
		if !recorded {
			t.Fatal("the teardown's record was not in af-system's ConfigMaps while it ran")
		}
		if recs, err := journal.List(ctx); err != nil || len(recs) != 0 {
			t.Fatalf("records left in af-system: %v, %v", recs, err)
		}
	})

	t.Run("a teardown cut short after its namespace went: the next run resumes it from the ConfigMap", func(t *testing.T) {
		fx.s.preview(t, 109)
		fx.environment(t, "af-env-shop-pr-109", testRepo, 109, time.Time{}, true, 1)
		cut := &cutAfterDown{Cluster: fx.rt, removed: make(chan struct{})}
		first, err := New(Config{Secret: secret, Cluster: cut, GitHub: fx.s.gh, Grace: time.Second, ReapInterval: time.Hour, Journal: fx.journal})
		if err != nil {
			t.Fatal(err)
		}
		if code := post(t, first.Handler(), "c-109", fx.s.closed(t, 109, true)); code != http.StatusAccepted {
			t.Fatal(code)
		}
		<-cut.removed
		if left := first.Close(contextWithTimeout(t, time.Second)); left != 1 {
			t.Fatalf("%d left at shutdown, want 1", left)
		}
		if !fx.gone("af-env-shop-pr-109") || report.IsGone(fx.s.Comments(109)[0].Body) {
			t.Fatal("want the namespace gone and the comment not yet rewritten")
		}
		cms, err := fx.kube.CoreV1().ConfigMaps(journalNS).List(context.Background(), metav1.ListOptions{LabelSelector: clusterstore.LabelRecord + "=teardown"})
		if err != nil || len(cms.Items) != 1 {
			t.Fatalf("journal ConfigMaps after shutdown: %v, %v", cms, err)
		}
		t.Logf("recorded in %s/%s", journalNS, cms.Items[0].Name)
		next, err := New(Config{Secret: secret, Cluster: fx.rt, GitHub: fx.s.gh, ReapInterval: time.Hour, Journal: fx.journal})
		if err != nil {
			t.Fatal(err)
		}
		defer drain(t, next)
		if n, err := next.Pool.Resume(context.Background()); err != nil || n != 1 {
			t.Fatalf("Resume: %d, %v", n, err)
		}
		waitFor(t, time.Minute, func() bool { c := fx.s.Comments(109); return len(c) == 1 && report.IsGone(c[0].Body) })
		fx.gonePR(t, 109, report.ReasonMerged)
		waitFor(t, time.Minute, func() bool { r, err := fx.journal.List(context.Background()); return err == nil && len(r) == 0 })
	})

	t.Run("the API server restarted while a teardown runs: it completes", func(t *testing.T) {
		fx.s.preview(t, 107)
		// The pod ignores SIGTERM for 20s: the namespace is terminating when the API server goes.
		fx.environment(t, "af-env-shop-pr-107", testRepo, 107, time.Time{}, true, 20)
		if code := post(t, fx.srv.Handler(), "c-107", fx.s.closed(t, 107, false)); code != http.StatusAccepted {
			t.Fatal(code)
		}
		waitFor(t, time.Minute, func() bool {
			ns, err := fx.kube.CoreV1().Namespaces().Get(context.Background(), "af-env-shop-pr-107", metav1.GetOptions{})
			return err == nil && ns.DeletionTimestamp != nil
		})
		start := time.Now()
		if err := testcluster.RestartAPIServer(context.Background(), 5*time.Second, t.Logf); err != nil {
			t.Fatal(err)
		}
		t.Logf("API server back after %s", time.Since(start).Round(100*time.Millisecond))
		fx.waitGone(t, "af-env-shop-pr-107", 3*time.Minute)
		waitFor(t, 2*time.Minute, func() bool { c := fx.s.Comments(107); return len(c) == 1 && report.IsGone(c[0].Body) })
		fx.gonePR(t, 107, report.ReasonClosed)
	})
}

// testLog writes the App's log lines to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func removes(sw *Sweep, ns string) bool {
	for _, r := range sw.Removals {
		if r.Environment.Namespace == ns {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, within time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not so after %s", within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
