package sidecar

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/internal/testnet"
	"github.com/antifailure/af/manifest"
	"github.com/antifailure/af/sidecar/config"
)

// TestBenchSidecarTable measures the sidecar side by side with its peers and prints the table
// (make bench-sidecar). It asserts nothing about speed: figures are reported, not tested.
// Everything runs on this machine: the upstream is a network namespace this test makes.
func TestBenchSidecarTable(t *testing.T) {
	if os.Getenv("AF_BENCH") == "" {
		t.Skip("SKIPPED: a benchmark; run with make bench-sidecar (AF_BENCH=1)")
	}
	need(t, "hey", "squid", "tinyproxy", "dnsperf", "dnsmasq")
	n := testnet.New(t)
	up := n.Host("benchup")
	// The upstream runs as its own process inside its namespace, so it shares no runtime with
	// the sidecar under test.
	const streamBytes = 1 << 30
	upstream := exec.Command("ip", "netns", "exec", up.Name, os.Args[0], "-test.run", "^TestBenchUpstreamProcess$")
	upstream.Env = append(os.Environ(), "AF_BENCH_UPSTREAM=1")
	if err := upstream.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = upstream.Process.Kill(); _ = upstream.Wait() })
	waitAddr(t, up.Addr.String()+":80")
	waitAddr(t, up.Addr.String()+":9000")
	dir := t.TempDir()

	// The cluster resolver for forwarded names: a dnsmasq holding one record, and 1,000 more
	// (web-0 … web-999) for the column where no two queries in flight are alike.
	var hosts, distinct strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&hosts, "10.96.%d.%d web-%d.af-env-bench.svc.cluster.local\n", 1+i/250, i%250, i)
		fmt.Fprintf(&distinct, "web-%d.af-env-bench.svc.cluster.local A\n", i)
	}
	hostsFile := filepath.Join(dir, "hosts")
	writeFile(t, hostsFile, hosts.String())
	clusterPort := freePort(t)
	startProc(t, "dnsmasq", "-k", "--no-resolv", "--no-hosts", "--listen-address=127.0.0.1", "--bind-interfaces", "-p", strconv.Itoa(clusterPort),
		"--host-record=web.af-env-bench.svc.cluster.local,10.96.0.10", "--addn-hosts="+hostsFile, "--cache-size=0", "--pid-file="+filepath.Join(dir, "c.pid"))

	// A second cluster resolver answering as CoreDNS's kubernetes plugin does, with a TTL of 5
	// seconds (the first answers with TTL 0, so that every query is relayed).
	cluster5Port := freePort(t)
	startProc(t, "dnsmasq", "-k", "--no-resolv", "--no-hosts", "--listen-address=127.0.0.1", "--bind-interfaces", "-p", strconv.Itoa(cluster5Port),
		"--host-record=web.af-env-bench.svc.cluster.local,10.96.0.10", "--local-ttl=5", "--cache-size=0", "--pid-file="+filepath.Join(dir, "c5.pid"))

	// The sidecar.
	cfg := config.Config{
		Environment: "bench", Namespace: "af-env-bench", Services: []string{"web"},
		ClusterResolver: fmt.Sprintf("127.0.0.1:%d", clusterPort), AdvertiseIPv4: "198.18.250.1",
		Egress: manifest.Egress{Default: "block", Rules: []manifest.EgressRule{{CIDR: up.Addr.String() + "/32"}}},
		// DNS on the dual-stack socket, as the sidecar's default ":53" opens it in a pod (asked
		// at 127.0.0.1 only).
		Listen: config.Listen{Proxy: "127.0.0.1:0", DNS: ":0", Control: "127.0.0.1:0"},
		Limits: config.Limits{MaxConns: 4096},
	}
	sc := benchSidecar(t, cfg)
	cfg5 := cfg
	cfg5.ClusterResolver = fmt.Sprintf("127.0.0.1:%d", cluster5Port)
	sc5 := benchSidecar(t, cfg5)

	// squid and tinyproxy, each a plain forward proxy on loopback, logging nothing.
	squidPort := freePort(t)
	squidConf := filepath.Join(dir, "squid.conf")
	writeFile(t, squidConf, fmt.Sprintf(`http_port 127.0.0.1:%d
http_access allow all
cache deny all
access_log none
cache_log /dev/null
cache_store_log none
pid_filename %s/squid.pid
coredump_dir %s
shutdown_lifetime 1 seconds
max_filedescriptors 8192
`, squidPort, dir, dir))
	_ = os.Chmod(dir, 0o777)
	startProc(t, "squid", "-N", "-f", squidConf)
	tinyPort := freePort(t)
	tinyConf := filepath.Join(dir, "tinyproxy.conf")
	writeFile(t, tinyConf, fmt.Sprintf("Port %d\nListen 127.0.0.1\nTimeout 600\nMaxClients 2000\nAllow 127.0.0.1\nLogLevel Critical\nUser nobody\nGroup nogroup\n", tinyPort))
	startProc(t, "tinyproxy", "-d", "-c", tinyConf)
	waitPort(t, squidPort)
	waitPort(t, tinyPort)

	// dnsmasq doing what the sidecar's DNS does: every external name answers one address, the
	// environment's names are forwarded to the cluster resolver.
	dnsmasqPort := freePort(t)
	startProc(t, "dnsmasq", "-k", "--no-resolv", "--no-hosts", "--listen-address=127.0.0.1", "--bind-interfaces", "-p", strconv.Itoa(dnsmasqPort),
		"--address=/#/198.18.250.1", fmt.Sprintf("--server=/svc.cluster.local/127.0.0.1#%d", clusterPort), "--cache-size=0", "--pid-file="+filepath.Join(dir, "d.pid"))
	// The same, keeping answers as dnsmasq does by default (150 of them), for the TTL-5 column.
	dnsmasq5Port := freePort(t)
	startProc(t, "dnsmasq", "-k", "--no-resolv", "--no-hosts", "--listen-address=127.0.0.1", "--bind-interfaces", "-p", strconv.Itoa(dnsmasq5Port),
		"--address=/#/198.18.250.1", fmt.Sprintf("--server=/svc.cluster.local/127.0.0.1#%d", cluster5Port), "--cache-size=150", "--pid-file="+filepath.Join(dir, "d5.pid"))
	time.Sleep(300 * time.Millisecond)

	target := "http://" + up.Addr.String() + "/"
	proxies := []struct{ name, url string }{
		{"direct", ""},
		{"af sidecar", "http://" + sc.Addr(Proxy).String()},
		{"squid", fmt.Sprintf("http://127.0.0.1:%d", squidPort)},
		{"tinyproxy", fmt.Sprintf("http://127.0.0.1:%d", tinyPort)},
	}
	// AF_BENCH_ONLY=dns or =http measures one half (a profile of one, say); the table of record
	// is the whole run.
	only := os.Getenv("AF_BENCH_ONLY")
	// The paths and servers take turns row by row (HTTP) or column by column (DNS), so a slow
	// spell of the machine falls on all of them. AF_BENCH_ROUNDS=n repeats each turn n times
	// and reports the median.
	rounds := 1
	if n, err := strconv.Atoi(os.Getenv("AF_BENCH_ROUNDS")); err == nil && n > 1 {
		rounds = n
	}
	var table strings.Builder
	if only != "dns" {
		httpRows(t, &table, proxies, target, up.Addr.String()+":9000", streamBytes, rounds)
	}
	if only == "http" {
		t.Log(table.String())
		fmt.Println(table.String())
		return
	}
	queries := filepath.Join(dir, "queries.txt")
	ext := filepath.Join(dir, "ext.txt")
	many := filepath.Join(dir, "distinct.txt")
	writeFile(t, ext, strings.Repeat("api.example.test A\nmail.example.test A\n", 500))
	writeFile(t, queries, strings.Repeat("web.af-env-bench.svc.cluster.local A\n", 1000))
	writeFile(t, many, distinct.String())
	fmt.Fprintf(&table, "\nDNS (dnsperf -l 10, 50 outstanding queries), q/s:\n"+
		"| server | external name (own-address answer) | one internal name, resolver TTL 0: nothing kept, identical queries in flight share one upstream query (both servers do) | 1,000 internal names, resolver TTL 0: every query relayed | one internal name, resolver TTL 5 as CoreDNS answers (both keep answers) |\n|---|---|---|---|---|\n")
	sidecarPort, sidecar5Port := portOf(sc.Addr(DNS).String()), portOf(sc5.Addr(DNS).String())
	servers := []struct {
		name  string
		ports [4]string
	}{
		{"af sidecar", [4]string{sidecarPort, sidecarPort, sidecarPort, sidecar5Port}},
		{"dnsmasq", [4]string{strconv.Itoa(dnsmasqPort), strconv.Itoa(dnsmasqPort), strconv.Itoa(dnsmasqPort), strconv.Itoa(dnsmasq5Port)}},
	}
	cells := make([][]string, len(servers))
	var ratios []string
	for i, f := range []string{ext, queries, many, queries} {
		runs := make([][]dnsRun, len(servers))
		for range rounds {
			for j, s := range servers {
				runs[j] = append(runs[j], dnsperf(t, s.name, s.ports[i], f))
			}
		}
		for j := range servers {
			cells[j] = append(cells[j], medianRun(runs[j]))
		}
		if m := median(runs[1]).qps; m > 0 {
			ratios = append(ratios, fmt.Sprintf("%.2f", median(runs[0]).qps/m))
		}
	}
	for j, s := range servers {
		fmt.Fprintf(&table, "| %s | %s |\n", s.name, strings.Join(cells[j], " | "))
	}
	if rounds > 1 {
		fmt.Fprintf(&table, "(median of %d runs each, taking turns)\n", rounds)
	}
	fmt.Fprintf(&table, "ratio sidecar/dnsmasq q/s by column %s (goal >= 1.00 on each)\n", strings.Join(ratios, " "))
	t.Log(table.String())
	fmt.Println(table.String())
}

// httpRows measures HTTP requests and a CONNECT tunnel through each proxy into table: the
// proxies take turns, rounds times, and each figure is the median of its rounds.
func httpRows(t *testing.T, table *strings.Builder, proxies []struct{ name, url string }, target, tunnelTarget string, streamBytes, rounds int) {
	t.Helper()
	fmt.Fprintf(table, "\nHTTP through a proxy to a local upstream (hey -n 50000 -c 50), and a 1 GiB CONNECT tunnel:\n")
	fmt.Fprintf(table, "| path | requests/s | p99 latency | tunnel MB/s |\n|---|---|---|---|\n")
	runs := map[string][]httpRun{}
	for range rounds {
		for _, p := range proxies {
			args := []string{"-n", "50000", "-c", "50"}
			if p.url != "" {
				args = append(args, "-x", p.url)
			}
			out, err := exec.Command("hey", append(args, target)...).CombinedOutput()
			if err != nil {
				t.Fatalf("hey %s: %v\n%s", p.name, err, out)
			}
			r, _ := strconv.ParseFloat(match(`Requests/sec:\s+([0-9.]+)`, string(out)), 64)
			p99, _ := strconv.ParseFloat(match(`99%+ in ([0-9.]+) secs`, string(out)), 64)
			if n := match(`\[200\]\s+([0-9]+) responses`, string(out)); n != "50000" {
				t.Fatalf("hey %s: %s of 50000 requests answered 200:\n%s", p.name, n, out)
			}
			runs[p.name] = append(runs[p.name], httpRun{rps: r, p99: p99 * 1000, mbps: tunnel(t, p.url, tunnelTarget, streamBytes)})
		}
	}
	got := map[string]httpRun{}
	for _, p := range proxies {
		m := medianHTTP(runs[p.name])
		got[p.name] = m
		fmt.Fprintf(table, "| %s | %.0f | %.2f ms | %.0f |\n", p.name, m.rps, m.p99, m.mbps)
	}
	if rounds > 1 {
		fmt.Fprintf(table, "(each figure the median of %d rounds, taking turns)\n", rounds)
	}
	// The ratios issue 32 sets goals for, from this run's rows.
	sc, squid, direct := got["af sidecar"], got["squid"], got["direct"]
	if squid.rps > 0 && direct.rps > 0 && squid.p99 > 0 && squid.mbps > 0 {
		fmt.Fprintf(table, "ratio sidecar/squid requests/s %.2f (goal >= 1.30)\n", sc.rps/squid.rps)
		fmt.Fprintf(table, "ratio sidecar/squid p99 %.2f (goal <= 1.00)\n", sc.p99/squid.p99)
		fmt.Fprintf(table, "ratio sidecar/direct requests/s %.2f (goal >= 0.50)\n", sc.rps/direct.rps)
		fmt.Fprintf(table, "ratio sidecar/squid CONNECT MB/s %.2f (goal >= 1.20)\n", sc.mbps/squid.mbps)
	}
}

// medianHTTP is the median of each figure of runs, taken apart.
func medianHTTP(runs []httpRun) httpRun {
	pick := func(f func(httpRun) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	return httpRun{
		rps:  pick(func(r httpRun) float64 { return r.rps }),
		p99:  pick(func(r httpRun) float64 { return r.p99 }),
		mbps: pick(func(r httpRun) float64 { return r.mbps }),
	}
}

// httpRun is one proxy's row of the HTTP table.
type httpRun struct{ rps, p99, mbps float64 }

// dnsRun is one dnsperf run's figures.
type dnsRun struct {
	qps  float64
	lost string
}

// dnsperf runs dnsperf for 10 s with 50 queries outstanding against port on loopback.
func dnsperf(t *testing.T, name, port, queries string) dnsRun {
	t.Helper()
	out, err := exec.Command("dnsperf", "-s", "127.0.0.1", "-p", port, "-d", queries, "-l", "10", "-q", "50").CombinedOutput()
	if err != nil {
		t.Fatalf("dnsperf %s: %v\n%s", name, err, out)
	}
	qps, err := strconv.ParseFloat(match(`Queries per second:\s+([0-9.]+)`, string(out)), 64)
	if err != nil {
		t.Fatalf("dnsperf %s printed no rate:\n%s", name, out)
	}
	return dnsRun{qps: qps, lost: match(`Queries lost:\s+([0-9]+)`, string(out))}
}

// medianRun formats the median of runs by rate, with what it lost.
// median is the run with the median queries per second.
func median(runs []dnsRun) dnsRun {
	sorted := append([]dnsRun(nil), runs...)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a].qps < sorted[b].qps })
	return sorted[len(sorted)/2]
}

func medianRun(runs []dnsRun) string {
	m := median(runs)
	return fmt.Sprintf("%.0f (lost %s)", m.qps, m.lost)
}

// benchSidecar starts a sidecar from cfg, logging nothing, shut down when the test ends.
func benchSidecar(t *testing.T, cfg config.Config) *Sidecar {
	t.Helper()
	res, err := cfg.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := Start(context.Background(), res, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.Shutdown(context.Background()) })
	return sc
}

// tunnel reads total bytes from target, through a CONNECT proxy when proxyURL is set, and
// returns the throughput in MB/s. The reader is a process of its own (this test binary again),
// so that it shares no runtime with the sidecar under test, and it reads 256 KiB at a time.
func tunnel(t *testing.T, proxyURL, target string, total int) float64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestBenchTunnelClientProcess$")
	cmd.Env = append(os.Environ(), "AF_BENCH_TUNNEL_CLIENT=1", "AF_BENCH_TUNNEL_PROXY="+proxyURL, "AF_BENCH_TUNNEL_TARGET="+target)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tunnel client via %q: %v\n%s", proxyURL, err, out)
	}
	var n int64
	var secs float64
	if _, err := fmt.Sscanf(match(`tunnel-read ([0-9]+ [0-9.e+-]+)`, string(out)), "%d %g", &n, &secs); err != nil || secs <= 0 {
		t.Fatalf("tunnel client via %q printed no figure: %v\n%s", proxyURL, err, out)
	}
	if int(n) != total {
		t.Logf("tunnel via %q read %d of %d bytes", proxyURL, n, total)
	}
	return float64(n) / 1e6 / secs
}

// TestBenchTunnelClientProcess is the tunnel's reader, run as a separate process by
// TestBenchSidecarTable: it connects to AF_BENCH_TUNNEL_TARGET (through the CONNECT proxy
// AF_BENCH_TUNNEL_PROXY when set), reads to the end and prints "tunnel-read <bytes> <seconds>".
func TestBenchTunnelClientProcess(t *testing.T) {
	if os.Getenv("AF_BENCH_TUNNEL_CLIENT") != "1" {
		t.Skip("SKIPPED: the benchmark's tunnel reader; started by TestBenchSidecarTable")
	}
	proxyURL, target := os.Getenv("AF_BENCH_TUNNEL_PROXY"), os.Getenv("AF_BENCH_TUNNEL_TARGET")
	start := time.Now()
	var src io.Reader
	if proxyURL == "" {
		c, err := net.Dial("tcp", target)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		src = c
	} else {
		c, err := net.Dial("tcp", strings.TrimPrefix(proxyURL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		br := bufio.NewReaderSize(c, 256<<10)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT via %s: %v %v", proxyURL, resp, err)
		}
		src = br
	}
	buf := make([]byte, 256<<10)
	var n int64
	for {
		k, err := src.Read(buf)
		n += int64(k)
		if err != nil {
			break
		}
	}
	fmt.Printf("tunnel-read %d %g\n", n, time.Since(start).Seconds())
}

func match(re, s string) string {
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if m == nil {
		return "?"
	}
	return m[1]
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func waitPort(t *testing.T, port int) {
	t.Helper()
	waitAddr(t, fmt.Sprintf("127.0.0.1:%d", port))
}

func waitAddr(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("nothing listens on %s", addr)
}

// TestBenchUpstreamProcess is the benchmark's upstream, run as a separate process by
// TestBenchSidecarTable: HTTP on :80 answering "ok", and :9000 writing 1 GiB to each client.
func TestBenchUpstreamProcess(t *testing.T) {
	if os.Getenv("AF_BENCH_UPSTREAM") != "1" {
		t.Skip("SKIPPED: the benchmark's upstream process; started by TestBenchSidecarTable")
	}
	body := []byte("ok\n")
	ln, err := net.Listen("tcp4", ":80")
	if err != nil {
		t.Fatal(err)
	}
	src, err := net.Listen("tcp4", ":9000")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := src.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 256<<10)
				for sent := 0; sent < 1<<30; sent += len(buf) {
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func startProc(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}
