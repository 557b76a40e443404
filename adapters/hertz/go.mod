module github.com/ringpoll/ringpoll/adapters/hertz

go 1.26.0

replace github.com/ringpoll/ringpoll => ../..

require (
	github.com/ringpoll/ringpoll v0.0.0-00010101000000-000000000000
	golang.org/x/net v0.62.0
)

require (
	github.com/bytedance/sonic v1.15.0 // indirect
	github.com/bytedance/sonic/loader v0.5.0 // indirect
	github.com/cloudwego/base64x v0.1.6 // indirect
	github.com/cloudwego/gopkg v0.1.4 // indirect
	github.com/cloudwego/netpoll v0.7.2 // indirect
	github.com/fsnotify/fsnotify v1.5.4 // indirect
	github.com/klauspost/cpuid/v2 v2.2.9 // indirect
	github.com/tidwall/gjson v1.14.4 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.0 // indirect
	github.com/twitchyliquid64/golang-asm v0.15.1 // indirect
	golang.org/x/arch v0.0.0-20210923205945-b76863e36670 // indirect
	google.golang.org/protobuf v1.34.1 // indirect
)

require (
	github.com/bytedance/gopkg v0.1.3 // indirect
	github.com/cloudwego/hertz v0.10.4
	golang.org/x/sys v0.49.0 // indirect
)
