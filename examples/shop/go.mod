module github.com/antifailure/af/examples/shop

go 1.26
