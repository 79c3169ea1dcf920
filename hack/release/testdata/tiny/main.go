// A program for the SBOM test to read, built for another architecture than the test's.
package main

func main() {}
