package rabbittest

import (
	"context"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStartAndStop starts a server, checks that its API answers the
// administrator only, and that Stop leaves no process, port or directory.
func TestStartAndStop(t *testing.T) {
	r, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	t.Logf("RabbitMQ answered after %s", r.StartTime)
	for _, c := range []struct {
		user, password string
		want           int
	}{{r.User, r.Password, 200}, {r.User, "wrong", 401}, {"guest", "guest", 401}} {
		req, _ := http.NewRequest("GET", r.API()+"/whoami", nil)
		req.SetBasicAuth(c.user, c.password)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET /whoami as %s: %d, want %d", c.user, resp.StatusCode, c.want)
		}
	}
	pids := []int{r.node.Process.Pid, r.epmd.Process.Pid}
	r.Stop()
	for _, port := range []int{r.AMQPPort, r.HTTPPort, r.DistPort, r.EPMDPort} {
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(r.Host, strconv.Itoa(port)), time.Second); err == nil {
			c.Close()
			t.Errorf("port %d still open after Stop", port)
		}
	}
	for _, pid := range pids {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			t.Errorf("process %d still there after Stop", pid)
		}
	}
	if _, err := os.Stat(r.Dir); !os.IsNotExist(err) {
		t.Errorf("directory %s still there after Stop: %v", r.Dir, err)
	}
}

// TestStartTimesOut gives the server no time and wants a clear error
// that leaves nothing running.
func TestStartTimesOut(t *testing.T) {
	_, err := Start(context.Background(), Options{Timeout: time.Millisecond})
	if err == nil {
		t.Fatal("started within a millisecond")
	}
	if !strings.Contains(err.Error(), "did not answer within 1ms") {
		t.Errorf("error %q does not say the server did not come up in time", err)
	}
}
