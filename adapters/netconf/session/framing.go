package session

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// endOfMessage ends a message in base:1.0 framing (RFC 6242 section 4.3).
var endOfMessage = []byte("]]>]]>")

// framer reads and writes NETCONF messages on an SSH channel: end-of-
// message framing until both ends said base:1.1, chunked framing after.
type framer struct {
	r       *bufio.Reader
	w       io.Writer
	chunked bool
	max     int64
	// pending is sent with the next message, in the same write (a
	// test's way to make a device read both at once).
	pending []byte
}

func newFramer(r io.Reader, w io.Writer, max int64) *framer {
	return &framer{r: bufio.NewReaderSize(r, 32<<10), w: w, max: max}
}

// write sends one message.
func (f *framer) write(msg []byte) error {
	var buf bytes.Buffer
	buf.Write(f.pending)
	f.pending = nil
	if f.chunked {
		fmt.Fprintf(&buf, "\n#%d\n", len(msg))
		buf.Write(msg)
		buf.WriteString("\n##\n")
	} else {
		buf.Write(msg)
		buf.Write(endOfMessage)
	}
	_, err := f.w.Write(buf.Bytes())
	return err
}

// read returns the next message. A message over f.max bytes or broken
// framing is ErrHostile; the connection ending is io.EOF or
// io.ErrUnexpectedEOF.
func (f *framer) read() ([]byte, error) {
	if f.chunked {
		return f.readChunked()
	}
	return f.readEOM()
}

func (f *framer) readEOM() ([]byte, error) {
	var msg []byte
	for {
		b, err := f.r.ReadSlice('>')
		msg = append(msg, b...)
		if int64(len(msg)) > f.max+int64(len(endOfMessage)) {
			return nil, fmt.Errorf("%w: a message larger than %d bytes", ErrHostile, f.max)
		}
		switch {
		case err == nil:
			if bytes.HasSuffix(msg, endOfMessage) {
				return msg[:len(msg)-len(endOfMessage)], nil
			}
		case errors.Is(err, bufio.ErrBufferFull):
		case err == io.EOF && len(msg) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

// maxChunkDigits bounds a chunk size: 4294967295 has ten digits.
const maxChunkDigits = 10

func (f *framer) readChunked() ([]byte, error) {
	var msg []byte
	for first := true; ; first = false {
		size, end, err := f.chunkHeader(first)
		if err != nil {
			return nil, err
		}
		if end {
			if first {
				return nil, fmt.Errorf("%w: a chunked message with no chunk", ErrHostile)
			}
			return msg, nil
		}
		if int64(len(msg))+size > f.max {
			return nil, fmt.Errorf("%w: a message larger than %d bytes", ErrHostile, f.max)
		}
		n := len(msg)
		msg = append(msg, make([]byte, size)...)
		if _, err := io.ReadFull(f.r, msg[n:]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// chunkHeader reads "\n#<size>\n" or, unless first, "\n##\n" (end).
func (f *framer) chunkHeader(first bool) (size int64, end bool, err error) {
	bad := func(what string) (int64, bool, error) {
		return 0, false, fmt.Errorf("%w: broken chunked framing: %s", ErrHostile, what)
	}
	for i, want := range []byte("\n#") {
		c, err := f.r.ReadByte()
		if err != nil {
			if err == io.EOF && !(first && i == 0) {
				err = io.ErrUnexpectedEOF
			}
			return 0, false, err
		}
		if c != want {
			return bad(fmt.Sprintf("%q where %q was expected", c, want))
		}
	}
	var digits []byte
	for {
		c, err := f.r.ReadByte()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, false, err
		}
		switch {
		case c == '#' && len(digits) == 0 && !first:
			if c, err := f.r.ReadByte(); err != nil || c != '\n' {
				return bad("end-of-chunks not followed by a newline")
			}
			return 0, true, nil
		case c >= '0' && c <= '9' && len(digits) < maxChunkDigits:
			if c == '0' && len(digits) == 0 {
				return bad("a chunk size starting with 0")
			}
			digits = append(digits, c)
		case c == '\n' && len(digits) > 0:
			n, err := strconv.ParseUint(string(digits), 10, 32)
			if err != nil {
				return bad("chunk size " + string(digits))
			}
			return int64(n), false, nil
		default:
			return bad(fmt.Sprintf("%q in a chunk header", c))
		}
	}
}
