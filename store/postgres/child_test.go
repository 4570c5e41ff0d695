package postgres_test

// childEnv marks a child process of the cross-process tests.
const childEnv = "TOOLLOOP_POSTGRES_TEST_CHILD"

func childMain() int { return 0 }
