package api_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/api"
)

// TestSlowBodyIsCutOff: a client that trickles its body is answered (or
// dropped) once the body timeout has passed, instead of holding the
// connection for as long as it likes.
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{BodyTimeout: 300 * time.Millisecond})
	u, _ := url.Parse(f.srv.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"name":"slow-project"}`
	fmt.Fprintf(conn, "POST /api/v1/projects HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", u.Host, f.token, len(body)+1000)
	start := time.Now()
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			done <- nil
			return
		}
		done <- resp
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case resp := <-done:
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Fatalf("cut off after %s, want about the 300 ms timeout", elapsed)
			}
			if resp != nil && resp.StatusCode < 400 {
				t.Fatalf("a trickled body was accepted: %d", resp.StatusCode)
			}
			return
		case <-tick.C:
			if time.Since(start) > 10*time.Second {
				t.Fatal("the server still waits for the body after 10 s")
			}
			// One byte at a time; ignore write errors once the server hung up.
			_, _ = conn.Write([]byte(strings.Repeat(" ", 1)))
		}
	}
}
