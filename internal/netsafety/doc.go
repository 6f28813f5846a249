// Package netsafety holds one test: that no test of af names a real public address or the
// cloud metadata address. Tests may only reach loopback and hosts in network namespaces they
// made; this scan catches the literal that would break that rule.
package netsafety
