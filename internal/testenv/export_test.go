package testenv

// Fuzzing exports fuzzing to the tests.
var Fuzzing = fuzzing
