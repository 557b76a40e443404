module github.com/ringpoll/ringpoll/cmd/ringtune

go 1.26.0

require (
	github.com/prometheus/procfs v0.23.0
	github.com/safchain/ethtool v0.7.0
	golang.org/x/sys v0.49.0
)
