package hedgeprobe

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// attempt is one upstream stream opened for a call.
//
// Ownership: the fields above mu are set at launch and then only read.
// mu guards src and released, shared by the reading goroutine, the
// goroutine driving the Stream and the stall watchdog. The fields below
// are owned by the goroutine driving the Stream (the caller of Next or
// Close); the reading goroutine never touches them.
type attempt[T any] struct {
	idx      int
	route    *Route[T]
	trigger  Trigger
	launchAt time.Time
	launch   time.Duration // since the call started
	delay    time.Duration // hedge delay in force after this launch
	ctx      context.Context
	cancel   context.CancelFunc
	prefix   string // the text a resume attempt continues; "" otherwise
	// handoff is closed by the driver when this attempt commits with
	// Streaming and no resume: its reading goroutine stops and leaves the
	// source to the caller's Next. nil when the reader relays every item.
	handoff chan struct{}
	// parent is, for a resume before commit, the stalled attempt it
	// continues: its first parentItems items (parentContent of them
	// content) come before this attempt's own in what the caller reads.
	of            *attempt[T] // a resume's stalled attempt
	parent        *attempt[T]
	parentItems   int
	parentContent int64
	// delivered is, for a resume after commit, the content chunks the
	// caller had when it was launched.
	delivered int64
	// adm is route health's grant: the epoch it was admitted at, whether
	// it probes its route after an ejection, and the grace-period counter
	// it leaves once health has heard its end (Stream.end).
	adm admission

	mu       sync.Mutex
	src      Source[T]
	released bool
	closing  bool          // src.Close has been called
	closed   chan struct{} // closed once src.Close has returned

	done       bool // outcome decided; events still in flight are discarded
	ended      bool // its stream ended cleanly (a winner that committed at its end)
	outcome    AttemptOutcome
	err        error
	endAt      time.Duration
	reportAt   time.Time // ended at, while its report waits for the call's end (handsOn)
	buf        []item[T]
	content    int64
	shown      int64         // content chunks of this attempt delivered to the caller
	first      time.Duration // first content chunk since call start, when content > 0
	firstItem  int           // index in buf of the first content chunk
	opening    int           // Control items before the first content chunk
	openAsked  bool          // a resume attempt: its Control items before content are put to Items.Opening
	askFollow  bool          // a resume attempt whose items are still put to Items.Follows
	follows    bool          // a resume attempt that follows the answer (Items.Follows) from buf[followAt]
	followAt   int
	last       time.Duration // latest content chunk since call start
	stallSpent time.Duration // value of last when the stall trigger fired; -1 never
	tokens     int64
	hasTokens  bool
	// uncounted: a failure route health does not count (cut off by the
	// call's TTFT watchdog before its hedge delay; see finish).
	uncounted bool
	rec       *attemptRecorder
	// answer is, on a resume attempt whose items reach the caller, the
	// latest content item the caller had before its first (Items.Relabel),
	// set then: a pointer, as an SDK's item can weigh kilobytes. Used on
	// the caller's goroutine only.
	answer *T
	// readerEnded: its reading goroutine sent the stream's end and
	// closes its source itself, if it opened one (see run). The driver
	// then only cancels it: waiting there on a slow Close would hold up
	// what the end asks for (a hedge or a resume at once) while the
	// watchdogs' clock runs. finish still waits for the reader, so the
	// attempt's report and span may end before its Close returns.
	readerEnded bool
}

// chainContent is the content chunks that count towards a Streaming
// commit: the parent's prefix and the attempt's own.
func (a *attempt[T]) chainContent() int64 { return a.parentContent + a.content }

// prefixChunks is, for a resume attempt, the content chunks its prefix
// was read from: those delivered before it (after commit), or its
// parent's chain up to where it continues (before commit).
func (a *attempt[T]) prefixChunks() int64 {
	switch {
	case a.trigger != TriggerResume:
		return 0
	case a.parent != nil:
		return a.parentContent
	}
	return a.delivered
}

// stats describes the attempt.
func (a *attempt[T]) stats() AttemptStats {
	st := AttemptStats{
		Index: a.idx, Route: a.route.Name, Provider: a.route.Provider, Model: a.route.Model,
		Trigger: a.trigger, Outcome: a.outcome, Err: a.err, LaunchOffset: a.launch,
		ContentChunks: a.content, ChunksDelivered: a.shown, ResumeOf: -1, DeliveredBefore: a.delivered,
	}
	if a.content > 0 {
		st.TTFT = a.first - a.launch
	}
	if a.done {
		st.Duration = a.endAt - a.launch
	}
	if a.of != nil {
		st.ResumeOf = a.of.idx
	}
	return st
}

type item[T any] struct {
	v     T
	kind  Kind
	opens bool        // a Control item of a continuation that Items.Opening says opens an answer
	from  *attempt[T] // the attempt that received it
}

type eventType uint8

const (
	evItem eventType = iota
	evEnd
)

// event is what a reading goroutine tells the driver.
type event[T any] struct {
	a     *attempt[T]
	typ   eventType
	kind  Kind
	ready bool          // Streaming: this content chunk reaches HoldChunks; the reader waits for handoff
	at    time.Duration // when the reader got the item or the end, since call start
	v     T
	err   error
}

// setSource publishes the opened source; false when the attempt was
// released meanwhile, and then the caller must close src itself.
func (a *attempt[T]) setSource(src Source[T]) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.released {
		return false
	}
	a.src = src
	return true
}

// source returns the published source.
func (a *attempt[T]) source() Source[T] {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.src
}

// release cancels the attempt's context and closes its source, exactly
// once whoever calls it and however often: the reader at its end, the
// driver at commit, failure (unless the reader reported the end itself:
// readerEnded) or finish, Close, the stall watchdog. A call
// that races the one closing the source waits until the source is closed,
// so when finish returns every source of the call is closed. (It waits on
// a channel rather than a sync.Once: a goroutine blocked on a mutex would
// keep a synctest bubble from ever advancing its clock.)
func (a *attempt[T]) release() {
	a.mu.Lock()
	a.released = true
	src := a.src
	first := src != nil && !a.closing
	if first {
		a.closing = true
	}
	waitClose := src != nil && !first
	a.mu.Unlock()
	a.cancel()
	switch {
	case first:
		closeQuietly(src)
		close(a.closed)
	case waitClose:
		<-a.closed
	}
}

// run is the reading goroutine of attempt a before commit: it opens the
// source, classifies every item and hands it to the driver. With
// Streaming it stops at the chunk that can commit the attempt and waits:
// either the driver commits it (handoff closed: the caller's Next reads the
// source from now on, so this goroutine must not touch it again) or the
// attempt is cancelled.
func (s *Stream[T]) run(a *attempt[T]) {
	defer s.life.wg.Done()
	defer s.recoverSource(a)
	src, err := openSafe(a)
	if err != nil {
		s.send(a, event[T]{a: a, typ: evEnd, err: err, at: time.Since(s.start)})
		return
	}
	if !a.setSource(src) {
		closeQuietly(src)
		return
	}
	var content int64
	for src.Next() {
		v := src.Current()
		k, err := s.classifySafe(v)
		if err != nil {
			s.send(a, event[T]{a: a, typ: evEnd, err: err, at: time.Since(s.start)})
			a.release()
			return
		}
		ready := false
		if k == Content {
			content++
			ready = a.handoff != nil && content+a.parentContent >= s.race.hold
		}
		if !s.send(a, event[T]{a: a, typ: evItem, kind: k, ready: ready, at: time.Since(s.start), v: v}) {
			a.release()
			return
		}
		if ready {
			select {
			case <-a.handoff:
				return
			case <-a.ctx.Done():
				a.release()
				return
			}
		}
	}
	// Send before release: release cancels a.ctx, which would make send
	// give up and lose the end.
	s.send(a, event[T]{a: a, typ: evEnd, err: vetError(a.route.Name, src.Err()), at: time.Since(s.start)})
	a.release()
}

// send delivers ev unless the attempt is cancelled first.
func (s *Stream[T]) send(a *attempt[T], ev event[T]) bool {
	select {
	case s.race.events <- ev:
		return true
	case <-a.ctx.Done():
		return false
	}
}

// recoverSource turns a panic of a's Source on its reading goroutine into
// the attempt's failure (ErrSourcePanic, fatal), so that a broken Source
// fails its call rather than the process.
func (s *Stream[T]) recoverSource(a *attempt[T]) {
	r := recover()
	if r == nil {
		return
	}
	s.send(a, event[T]{a: a, typ: evEnd, err: sourcePanic(a, r), at: time.Since(s.start)})
	a.release()
}

func sourcePanic[T any](a *attempt[T], r any) error {
	return panicked(ErrSourcePanic, fmt.Sprintf("route %q", a.route.Name), r)
}

// closeQuietly closes src, ignoring its error and a panic: by then the
// attempt's outcome is decided, and Close must not leave other releases
// waiting for it.
func closeQuietly[T any](src Source[T]) {
	defer func() { _ = recover() }()
	_ = src.Close()
}

func openSafe[T any](a *attempt[T]) (src Source[T], err error) {
	defer func() {
		if r := recover(); r != nil {
			src, err = nil, panicked(ErrOpenPanic, fmt.Sprintf("route %q", a.route.Name), r)
		}
	}()
	src, err = a.route.Open(a.ctx, Attempt{Index: a.idx, Trigger: a.trigger, Prefix: a.prefix, PrefixChunks: a.prefixChunks()})
	if err != nil {
		if src != nil {
			// Outside the recover above: a panic in Close is ignored (the
			// Source contract), not taken for the open's, and the open's
			// error, transient or not, stands.
			closeQuietly(src)
		}
		return nil, vetError(a.route.Name, err)
	}
	if src == nil {
		return nil, fmt.Errorf("%w: route %q", ErrNilSource, a.route.Name)
	}
	return src, nil
}

// classifySafe turns a panicking classifier into an error, and a Kind
// that is none of the three into Keepalive, as Kind.String names it: what
// the classifier cannot say is content never counts as progress.
func (s *Stream[T]) classifySafe(v T) (k Kind, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicked(ErrClassifierPanic, "", r)
		}
	}()
	if k = s.p.items.Classify(v); k > Content {
		k = Keepalive
	}
	return k, nil
}
