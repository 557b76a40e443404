module github.com/ringpoll/ringpoll/bench

go 1.26.0

replace github.com/ringpoll/ringpoll => ../

replace github.com/ringpoll/ringpoll/adapters/hertz => ../adapters/hertz

require (
	github.com/cloudwego/hertz v0.10.4
	github.com/cloudwego/netpoll v0.7.2
	github.com/miekg/dns v1.1.73
	github.com/panjf2000/gnet/v2 v2.10.0
	github.com/quic-go/quic-go v0.65.0
	github.com/ringpoll/ringpoll v0.0.0-00010101000000-000000000000
	github.com/ringpoll/ringpoll/adapters/hertz v0.0.0-00010101000000-000000000000
	gonum.org/v1/plot v0.17.0
	google.golang.org/grpc v1.85.0
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/bytedance/gopkg v0.1.3 // indirect
	github.com/bytedance/sonic v1.15.0 // indirect
	github.com/bytedance/sonic/loader v0.5.0 // indirect
	github.com/cloudwego/base64x v0.1.6 // indirect
	github.com/cloudwego/gopkg v0.1.4 // indirect
	github.com/fsnotify/fsnotify v1.5.4 // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/klauspost/cpuid/v2 v2.2.9 // indirect
	github.com/molecule-man/go-brrr v1.3.1 // indirect
	github.com/panjf2000/ants/v2 v2.12.1 // indirect
	github.com/tidwall/gjson v1.14.4 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.0 // indirect
	github.com/twitchyliquid64/golang-asm v0.15.1 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/valyala/fasthttp v1.78.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.uber.org/zap v1.28.0 // indirect
	golang.org/x/arch v0.0.0-20210923205945-b76863e36670 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/image v0.30.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	gopkg.in/natefinch/lumberjack.v2 v2.2.1 // indirect
)

tool google.golang.org/grpc/benchmark/client
