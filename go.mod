module github.com/toolloop/toolloop

go 1.26

require github.com/google/jsonschema-go v0.4.3

require go.uber.org/goleak v1.3.0
