module github.com/retrystorm/retrystorm

go 1.26
