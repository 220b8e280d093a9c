package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// DefaultMaxEventSize is the default limit on one SSE line and on the data
// of one event: 1 MiB.
const DefaultMaxEventSize = 1 << 20

// ErrTooLarge is matched (with errors.Is) by the error a Reader returns when
// a line or the data of an event exceeds its limit.
var ErrTooLarge = errors.New("sse: event too large")

// Event is one dispatched server-sent event or one comment line.
type Event struct {
	// Type is the event type: the last "event:" field of the event, or
	// "message" when it had none, as the WHATWG rules say. It is empty for a
	// comment.
	Type string
	// Data is the event's data: its "data:" fields joined with "\n". For a
	// comment it is the comment text after the colon and one optional space.
	// It is owned by the caller.
	Data []byte
	// Comment reports a comment line (": keepalive"), which the WHATWG rules
	// ignore but which proves the connection is alive.
	Comment bool
	// Received is when the bytes that completed the event arrived: the
	// return of the Read that delivered its dispatching blank line (or the
	// comment's line end). It carries a monotonic clock reading.
	Received time.Time
}

// Reader reads server-sent events from a byte stream following the WHATWG
// HTML "event stream interpretation" rules: LF, CR and CRLF line ends, one
// leading byte order mark, ":" comments, "data:" fields joined with "\n",
// "event:", "id:" and "retry:" (the latter two are parsed and ignored), a
// blank line dispatching the event, no event without data, and an
// unterminated event at the end of the stream discarded. It works on bytes:
// where the rules first decode the stream as UTF-8, an invalid sequence is
// kept as it came instead of becoming U+FFFD (a JSON decoder of the data
// replaces it).
//
// Memory is bounded: a line longer than the limit, or an event whose data
// grows past it, ends the stream with an error matching ErrTooLarge.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	r     io.Reader
	p     parser
	buf   []byte
	queue []Event
	qi    int
	cur   Event
	err   error // io.EOF at a clean end
	now   func() time.Time
	empty int // consecutive reads that returned nothing and no error
}

// maxEmptyReads is how many reads in a row may return nothing and no error
// before Next fails with io.ErrNoProgress (bufio's figure).
const maxEmptyReads = 100

// ReaderOption configures a Reader.
type ReaderOption func(*Reader)

// WithMaxEventSize sets the limit, in bytes, on one line and on the data of
// one event; n <= 0 means DefaultMaxEventSize. A line counts without its
// line ending, and an event's data as it is dispatched (its data lines
// joined with "\n"); either may reach the limit but not pass it.
func WithMaxEventSize(n int) ReaderOption {
	return func(r *Reader) {
		if n <= 0 {
			n = DefaultMaxEventSize
		}
		r.p.limit = n
	}
}

// NewReader returns a Reader of the event stream r.
func NewReader(r io.Reader, opts ...ReaderOption) *Reader {
	rd := &Reader{r: r, buf: make([]byte, 32<<10), now: time.Now}
	rd.p.limit = DefaultMaxEventSize
	for _, o := range opts {
		o(rd)
	}
	return rd
}

// Next advances to the next event or comment and reports whether there is
// one. It returns false at the end of the stream or after an error; 100
// reads in a row that return nothing and no error are one
// (io.ErrNoProgress).
func (r *Reader) Next() bool {
	for r.qi >= len(r.queue) {
		if r.err != nil {
			return false
		}
		r.queue, r.qi = r.queue[:0], 0
		n, err := r.r.Read(r.buf)
		if n == 0 && err == nil {
			// The io.Reader contract discourages it; a reader that does it
			// for good would spin here, so give up as bufio does.
			if r.empty++; r.empty >= maxEmptyReads {
				r.err = io.ErrNoProgress
			}
			continue
		}
		r.empty = 0
		if n > 0 {
			at := r.now()
			if perr := r.p.feed(r.buf[:n], at, r.push); perr != nil {
				// Events completed before the oversized line are still
				// delivered; the error follows them.
				r.err = perr
				continue
			}
		}
		if err != nil {
			r.err = err
		}
	}
	r.cur = r.queue[r.qi]
	r.queue[r.qi] = Event{}
	r.qi++
	return true
}

func (r *Reader) push(e Event) { r.queue = append(r.queue, e) }

// Event returns the current event.
func (r *Reader) Event() Event { return r.cur }

// Err returns the error that ended the stream: nil at a clean end of the
// bytes (io.EOF), whether or not an event was left unterminated.
func (r *Reader) Err() error {
	if r.err == io.EOF {
		return nil
	}
	return r.err
}

// parser is the push-style WHATWG state machine shared by Reader and Tap.
type parser struct {
	limit int
	// watch cuts a line or an event's data at limit instead of refusing
	// it: the Tap watches a stream for its keepalives and must keep
	// watching past an event the SDK reading the stream accepts. Watching,
	// the parser emits only keepalives (comments and "ping" events), the
	// Tap's only reports, and copies no other event's data.
	watch    bool
	line     []byte // a partial line carried across feeds
	skipLF   bool   // the last line ended with CR: a leading LF belongs to it
	bomCheck bool   // the BOM has been looked for
	data     []byte // the data buffer, each field followed by "\n"
	evType   string
}

var bom = []byte("\xEF\xBB\xBF")

func (p *parser) tooLarge(what string) error {
	return fmt.Errorf("%w: %s exceeds the limit of %d bytes (sse.WithMaxEventSize)", ErrTooLarge, what, p.limit)
}

// feed consumes b, calling emit for each event or comment it completes.
func (p *parser) feed(b []byte, at time.Time, emit func(Event)) error {
	// lf is the index in b of its first LF, -1 when it has none, lfUnknown
	// before the search: searched once per LF, not once per line, so that
	// lines ending in CR alone do not each scan the rest of the read.
	lf := lfUnknown
	for len(b) > 0 {
		if !p.bomCheck {
			// The BOM may arrive split across reads: hold back a prefix of
			// it until it is complete or disproved.
			p.line = append(p.line, b...)
			b = nil
			if len(p.line) < len(bom) && bytes.HasPrefix(bom, p.line) {
				return nil
			}
			p.bomCheck = true
			b = bytes.TrimPrefix(p.line, bom)
			p.line = nil
		}
		if p.skipLF {
			p.skipLF = false
			if b[0] == '\n' {
				b, lf = b[1:], lfUnknown
				continue
			}
		}
		if lf == lfUnknown {
			lf = bytes.IndexByte(b, '\n')
		}
		i := lineEnd(b, lf)
		if i < 0 {
			if len(p.line)+len(b) > p.limit {
				if !p.watch {
					return p.tooLarge("a line")
				}
				b = b[:max(p.limit-len(p.line), 0)]
			}
			p.line = append(p.line, b...)
			return nil
		}
		line := b[:i]
		if len(p.line) > 0 {
			if len(p.line)+i > p.limit {
				if !p.watch {
					return p.tooLarge("a line")
				}
				line = line[:max(p.limit-len(p.line), 0)]
			}
			p.line = append(p.line, line...)
			line = p.line
		} else if i > p.limit {
			if !p.watch {
				return p.tooLarge("a line")
			}
			line = line[:p.limit]
		}
		p.skipLF = b[i] == '\r'
		b = b[i+1:]
		switch {
		case i == lf:
			lf = lfUnknown
		case lf > 0:
			lf -= i + 1
		}
		err := p.processLine(line, at, emit)
		p.line = p.line[:0]
		if err != nil {
			return err
		}
	}
	return nil
}

// lfUnknown is feed's lf before b has been searched.
const lfUnknown = -2

// lineEnd returns the index of the first CR or LF in b, or -1, given lf,
// the index of b's first LF or -1. CR is searched only before the LF, with
// the vectorised IndexByte (IndexAny would scan byte by byte).
func lineEnd(b []byte, lf int) int {
	if lf < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if j := bytes.IndexByte(b[:lf], '\r'); j >= 0 {
		return j
	}
	return lf
}

func (p *parser) processLine(line []byte, at time.Time, emit func(Event)) error {
	if len(line) == 0 {
		if len(p.data) == 0 || p.watch && p.evType != "ping" {
			p.data, p.evType = p.data[:0], ""
			return nil
		}
		ev := Event{
			Type:     p.evType,
			Data:     bytes.Clone(p.data[:len(p.data)-1]),
			Received: at,
		}
		if ev.Type == "" {
			ev.Type = "message"
		}
		p.data, p.evType = p.data[:0], ""
		emit(ev)
		return nil
	}
	if line[0] == ':' {
		text := line[1:]
		if len(text) > 0 && text[0] == ' ' {
			text = text[1:]
		}
		emit(Event{Data: bytes.Clone(text), Comment: true, Received: at})
		return nil
	}
	field, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(field) {
	case "event":
		p.evType = string(value)
	case "data":
		if room := p.limit - len(p.data); len(value) > room {
			if !p.watch {
				return p.tooLarge("the data of an event")
			}
			if room < 0 {
				// Full, and ending in the "\n" of the line that filled
				// it: a further line adds nothing, so an event that is
				// never dispatched cannot grow the buffer a byte per line.
				return nil
			}
			value = value[:room]
		}
		p.data = append(p.data, value...)
		p.data = append(p.data, '\n')
	case "id", "retry":
		// Reconnection state: hedgeprobe never reconnects an attempt (a
		// new attempt is a new request), so both are ignored.
	}
	return nil
}
