return isNaN(value) ? 'not finite' : String(Number(value.toPrecision(4)));
