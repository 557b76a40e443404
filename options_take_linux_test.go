//go:build linux

package ringpoll

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// otAll are the constructors that take options, as the errors name them.
var otAll = []string{"Listen", "Dial", "NewServer", "ListenPacket", "DialPacket", "ListenPacketGroup", "NewPacketServer", "OpenFile", "NewFile"}

// otTakes says, for every exported option, which constructors take it:
// the specification TestOptionTakers holds the code to. Written out
// here, not derived from optionRules, so that a change to either shows.
var otTakes = map[string][]string{
	"WithEngine":          otAll,
	"WithLogger":          otAll,
	"WithLoops":           {"Listen", "Dial", "NewServer", "OpenFile", "NewFile"},
	"WithBufferRing":      {"Listen", "Dial", "NewServer", "OpenFile", "NewFile"},
	"WithBusyPoll":        {"Listen", "Dial", "NewServer", "OpenFile", "NewFile"},
	"WithLoopCPUs":        {"Listen", "Dial", "NewServer", "OpenFile", "NewFile", "NewPacketServer"},
	"WithInputHighWater":  {"Listen", "Dial", "NewServer"},
	"WithOutputHighWater": {"Listen", "Dial", "NewServer"},
	"WithIdleTimeout":     {"Listen", "Dial", "NewServer"},
	"WithDrainTimeout":    {"Listen", "Dial", "NewServer"},
	"WithInlineHandler":   {"NewServer", "NewPacketServer"},
	"WithReusePort":       {"ListenPacket", "ListenPacketGroup", "NewPacketServer"},
	"WithCPUSteering":     {"ListenPacketGroup", "NewPacketServer"},
	"WithPacketBatch":     {"NewPacketServer"},
	"WithGRO":             {"ListenPacket", "DialPacket", "ListenPacketGroup", "NewPacketServer"},
	"WithoutGSO":          {"ListenPacket", "DialPacket", "ListenPacketGroup", "NewPacketServer"},
}

// otEngines says which engines use the options that tune one; an engine
// named with WithEngine that is not listed refuses the option. The
// others' every engine takes.
var otEngines = map[string][]Engine{
	"WithBufferRing": {EngineUring, EngineUringHybrid, EngineUringSQPoll},
	"WithLoopCPUs":   {EngineUring, EngineUringHybrid, EngineUringReactor, EngineUringSQPoll},
	"WithBusyPoll":   {EngineUring, EngineUringHybrid, EngineUringReactor},
}

// otOptions returns a valid instance of every exported option.
func otOptions(t *testing.T) map[string]Option {
	cpu := threadCPUs(t)[0]
	return map[string]Option{
		"WithEngine":          WithEngine(EngineAuto),
		"WithLogger":          WithLogger(slog.New(slog.DiscardHandler)),
		"WithLoops":           WithLoops(1),
		"WithBufferRing":      WithBufferRing(64, 4096),
		"WithBusyPoll":        WithBusyPoll(10 * time.Microsecond),
		"WithLoopCPUs":        WithLoopCPUs(cpu),
		"WithInputHighWater":  WithInputHighWater(64 << 10),
		"WithOutputHighWater": WithOutputHighWater(64 << 10),
		"WithIdleTimeout":     WithIdleTimeout(time.Hour),
		"WithDrainTimeout":    WithDrainTimeout(time.Second),
		"WithInlineHandler":   WithInlineHandler(),
		"WithReusePort":       WithReusePort(2),
		"WithCPUSteering":     WithCPUSteering(),
		"WithPacketBatch":     WithPacketBatch(4, 2048),
		"WithGRO":             WithGRO(),
		"WithoutGSO":          WithoutGSO(),
	}
}

// otConstructors returns a call of every constructor that opens what it
// makes with opts and closes it again.
func otConstructors(t *testing.T) map[string]func(opts ...Option) error {
	stream, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stream.Close() })
	go func() {
		for {
			c, err := stream.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dgram, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dgram.Close() })
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, []byte("ringpoll"), 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]func(opts ...Option) error{
		"Listen": func(opts ...Option) error {
			ln, err := Listen("tcp", "127.0.0.1:0", opts...)
			if err == nil {
				ln.Close()
			}
			return err
		},
		"Dial": func(opts ...Option) error {
			c, err := Dial("tcp", stream.Addr().String(), opts...)
			if err == nil {
				c.Close()
			}
			return err
		},
		"NewServer": func(opts ...Option) error {
			srv, err := NewServer(tsEchoHandler, opts...)
			if err == nil {
				srv.Shutdown(context.Background())
			}
			return err
		},
		"ListenPacket": func(opts ...Option) error {
			c, err := ListenPacket("udp4", "127.0.0.1:0", opts...)
			if err == nil {
				c.Close()
			}
			return err
		},
		"DialPacket": func(opts ...Option) error {
			c, err := DialPacket("udp4", dgram.LocalAddr().String(), opts...)
			if err == nil {
				c.Close()
			}
			return err
		},
		"ListenPacketGroup": func(opts ...Option) error {
			cs, err := ListenPacketGroup("udp4", "127.0.0.1:0", opts...)
			for _, c := range cs {
				c.Close()
			}
			return err
		},
		"NewPacketServer": func(opts ...Option) error {
			s, err := NewPacketServer(psEcho, opts...)
			if err == nil {
				s.Close()
			}
			return err
		},
		"OpenFile": func(opts ...Option) error {
			f, err := OpenFile(file, os.O_RDWR, 0, opts...)
			if err == nil {
				f.Close()
			}
			return err
		},
		"NewFile": func(opts ...Option) error {
			osf, err := os.Open(file)
			if err != nil {
				return err
			}
			defer osf.Close()
			f, err := NewFile(osf, opts...)
			if err == nil {
				f.Close()
			}
			return err
		},
	}
}

// otCheck holds err, constructor ctor's with option opt, to what the
// tables say: nil where the option applies, else an error naming both
// and matching ErrInvalidOption.
func otCheck(t *testing.T, ctor, opt string, applies bool, err error) {
	t.Helper()
	switch {
	case applies && err != nil:
		t.Errorf("%s with %s: %v, want no error", ctor, opt, err)
	case !applies && !errors.Is(err, ErrInvalidOption):
		t.Errorf("%s with %s: %v, want an error matching ErrInvalidOption", ctor, opt, err)
	case !applies && !strings.Contains(err.Error(), "ringpoll: "+ctor+" ") ||
		!applies && !strings.Contains(err.Error(), " does not take "+opt+" "):
		t.Errorf("%s with %s: the error %q does not name both", ctor, opt, err)
	}
}

// TestOptionTakers walks every exported option against every
// constructor: where otTakes says it applies the call succeeds (under
// EngineAuto, the default, whichever engine that picks here), elsewhere
// it fails with ErrInvalidOption naming both. Then every option
// Listen takes against every engine named with WithEngine, which refuses
// the options otEngines does not give it. The tables must name exactly
// the exported options and constructors, read from the package's source,
// so that a new option or constructor fails here until it is placed.
func TestOptionTakers(t *testing.T) {
	defer engineLinger.Store(engineLinger.Swap(0))
	otComplete(t)
	opts, ctors := otOptions(t), otConstructors(t)
	for _, opt := range slices.Sorted(maps.Keys(otTakes)) {
		for _, ctor := range otAll {
			t.Run(opt+"/"+ctor, func(t *testing.T) {
				otCheck(t, ctor, opt, slices.Contains(otTakes[opt], ctor), ctors[ctor](opts[opt]))
			})
		}
	}
	for _, opt := range slices.Sorted(maps.Keys(otTakes)) {
		if !slices.Contains(otTakes[opt], "Listen") || opt == "WithEngine" {
			continue
		}
		for _, e := range testEngines {
			t.Run(opt+"/Listen/"+e.String(), func(t *testing.T) {
				applies := otEngines[opt] == nil || slices.Contains(otEngines[opt], e)
				if applies && e != EngineEpoll {
					needUring(t) // a refusal comes before the engine is looked at
				}
				err := ctors["Listen"](WithEngine(e), opts[opt])
				otCheck(t, "Listen on engine "+e.String(), opt, applies, err)
			})
		}
	}
}

// otComplete checks the tables against the package's source: the
// exported functions returning an Option, and those taking ...Option
// (Dialer.Options is Dial's), must be exactly those the tables name; and
// the rules the code checks must name the same options.
func otComplete(t *testing.T) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	options, takers := map[string]bool{}, map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() {
				continue
			}
			if r := fn.Type.Results; fn.Recv == nil && r != nil && len(r.List) == 1 && isIdent(r.List[0].Type, "Option") {
				options[fn.Name.Name] = true
			}
			for _, p := range fn.Type.Params.List {
				if e, ok := p.Type.(*ast.Ellipsis); ok && isIdent(e.Elt, "Option") {
					takers[fn.Name.Name] = true
				}
			}
		}
	}
	if got, want := slices.Sorted(maps.Keys(options)), slices.Sorted(maps.Keys(otTakes)); !slices.Equal(got, want) {
		t.Fatalf("the exported options are %v; the table names %v", got, want)
	}
	if got, want := slices.Sorted(maps.Keys(takers)), slices.Sorted(slices.Values(otAll)); !slices.Equal(got, want) {
		t.Fatalf("the functions taking ...Option are %v; the table names %v", got, want)
	}
	if got := strings.Split(inAll.String(), ", "); !slices.Equal(got, otAll) {
		t.Fatalf("the code's constructors are %v; the table names %v", got, otAll)
	}
	var rules []string
	for _, r := range optionRules {
		rules = append(rules, r.name)
	}
	if got, want := slices.Sorted(slices.Values(rules)), slices.Sorted(maps.Keys(otTakes)); !slices.Equal(got, want) {
		t.Fatalf("optionRules names %v; the table names %v", got, want)
	}
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// TestOptionsServerEngine: a Server given an engine option serves only
// listeners whose engine was made with the same; Serve refuses another
// with errListenerMismatch naming the option.
func TestOptionsServerEngine(t *testing.T) {
	ln := listen(t, EngineEpoll, "tcp", WithLoops(1))
	other, err := NewServer(tsEchoHandler, WithLoops(2))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Shutdown(context.Background())
	if err := other.Serve(ln); !errors.Is(err, errListenerMismatch) || !strings.Contains(err.Error(), "WithLoops") {
		t.Fatalf("Serve of a listener with another loop count: %v, want errListenerMismatch naming WithLoops", err)
	}
	tsServeHandler(t, ln, tsEchoHandler, WithEngine(EngineEpoll), WithLoops(1))
	if err := tsEchoOnce(tsDialStd(t, "tcp", ln.Addr().String()), "same loops"); err != nil {
		t.Fatal(err)
	}
}
