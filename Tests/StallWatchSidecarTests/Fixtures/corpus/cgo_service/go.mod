module stallwatch.example/cgo_service

go 1.19
