module github.com/retrystorm/retrystorm/bench

go 1.26.0

replace github.com/retrystorm/retrystorm => ../

require (
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/retrystorm/retrystorm v0.0.0-00010101000000-000000000000
	github.com/sony/gobreaker/v2 v2.4.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
)
