package testenv

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisCluster starts a Redis Cluster of three masters on loopback ports
// (the machine's redis-server, nothing kept on disk) for this test and
// returns its URL in go-redis's cluster form
// (redis://host:port?addr=host:port&addr=host:port). The nodes stop when
// the test ends.
func RedisCluster(t testing.TB) string {
	t.Helper()
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is needed for a Redis Cluster: %v", err)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redis-cli is needed for a Redis Cluster: %v", err)
	}
	dir := t.TempDir()
	addrs := make([]string, 3)
	for i := range addrs {
		port := freePort(t)
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", port)
		cmd := exec.Command(server, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
			"--cluster-config-file", fmt.Sprintf("nodes-%d.conf", port), "--save", "", "--appendonly", "no",
			"--dir", dir, "--daemonize", "no", "--loglevel", "warning")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	ctx := context.Background()
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		waitUntil(t, 10*time.Second, "redis node "+a, func() bool { return c.Ping(ctx).Err() == nil })
		_ = c.Close()
	}
	out, err := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...),
		"--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		waitUntil(t, 20*time.Second, "cluster state ok at "+a, func() bool {
			info, err := c.ClusterInfo(ctx).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		})
		_ = c.Close()
	}
	return "redis://" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2]
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitUntil(t testing.TB, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}
