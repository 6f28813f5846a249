// Command hello is afbuild's test program: it says what -ldflags -X set.
package main

import "fmt"

var greeting = "hello"

func main() { fmt.Println(greeting) }
