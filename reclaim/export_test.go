package reclaim

// The pure rules of the restore witness and of sessions recorded before a
// restore, for the tests of package reclaim_test.
var (
	JudgeWitness  = judgeWitness
	NextWitness   = nextWitness
	RestoreRemark = restoreRemark
)
