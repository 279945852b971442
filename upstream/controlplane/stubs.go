package main

func cmdUp(args []string) error     { return exitError{2, "up: not yet"} }
func cmdDown(args []string) error   { return exitError{2, "down: not yet"} }
func cmdStatus(args []string) error { return exitError{2, "status: not yet"} }
func cmdEnv(args []string) error    { return exitError{2, "env: not yet"} }
